package tensorboard

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/tensorboard/internal/tbpb"
)

const (
	// FilePrefix begins every event file's name; TensorBoard reads the
	// files whose names contain "tfevents".
	FilePrefix = "events.out.tfevents."
	// fileVersion is the version TensorBoard's own writers record.
	fileVersion = "brain.Event:2"
)

// Scalar is one chart's value at a step.
type Scalar struct {
	Tag   string
	Value float64
}

// Image is one picture at a step.
type Image struct {
	Tag   string
	Image image.Image
}

// Writer appends events to one new file in a run's TensorBoard folder.
// Its methods do nothing once it has failed (or when it was opened
// disabled); see the package doc.
type Writer struct {
	path string
	f    *os.File
	w    *bufio.Writer
	warn func(string)
	now  func() time.Time
	buf  []byte
}

// Open prepares dir for a run that continues after step from (0: a new
// run): records after from are taken out of the event files already there
// (a file left with none is removed), then a new file is started. warn
// receives the one warning a failure gives; nil discards it. Open never
// fails: a folder that cannot be written gives a Writer that writes
// nothing.
func Open(dir string, from int64, warn func(string)) *Writer {
	return open(dir, from, warn, time.Now)
}

func open(dir string, from int64, warn func(string), now func() time.Time) *Writer {
	w := &Writer{warn: warn, now: now}
	if err := w.start(dir, from); err != nil {
		w.fail(fmt.Errorf("%s: %w", dir, err))
	}
	return w
}

// start rolls the folder back to from and opens the new file.
func (w *Writer) start(dir string, from int64) error {
	if err := outdir.Subfolder(dir); err != nil {
		return err
	}
	latest, err := rollBack(dir, from, w.warn)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	host = strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(host)
	// The name sorts after every file there: TensorBoard reads a folder's
	// files in name order.
	stamp := max(w.now().Unix(), latest+1)
	w.path = filepath.Join(dir, fmt.Sprintf("%s%010d.%s.%d", FilePrefix, stamp, host, os.Getpid()))
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	w.f, w.w = f, bufio.NewWriterSize(f, 64<<10)
	events := []*tbpb.Event{{Step: 0, What: &tbpb.Event_FileVersion{FileVersion: fileVersion}}}
	if from > 0 {
		events = append(events, &tbpb.Event{Step: from + 1, What: &tbpb.Event_SessionLog{SessionLog: &tbpb.SessionLog{
			Status: tbpb.SessionLog_START, Msg: fmt.Sprintf("resumed after step %d", from)}}})
	}
	return w.write(events...)
}

// Path is the file being written ("" once failed at the start).
func (w *Writer) Path() string { return w.path }

// Scalars records values at step (float32, as TensorBoard keeps them).
func (w *Writer) Scalars(step int64, values []Scalar) {
	if w.f == nil || len(values) == 0 {
		return
	}
	s := &tbpb.Summary{}
	for _, v := range values {
		s.Value = append(s.Value, &tbpb.Summary_Value{Tag: v.Tag, Value: &tbpb.Summary_Value_SimpleValue{SimpleValue: float32(v.Value)}})
	}
	w.check(w.write(&tbpb.Event{Step: step, What: &tbpb.Event_Summary{Summary: s}}))
}

// Images records pictures at step, each as a PNG.
func (w *Writer) Images(step int64, images []Image) {
	if w.f == nil || len(images) == 0 {
		return
	}
	s := &tbpb.Summary{}
	for _, im := range images {
		var b bytes.Buffer
		if err := png.Encode(&b, im.Image); err != nil {
			w.fail(fmt.Errorf("encoding %s: %w", im.Tag, err))
			return
		}
		r := im.Image.Bounds()
		colorspace := int32(4) // RGBA
		if o, ok := im.Image.(interface{ Opaque() bool }); ok && o.Opaque() {
			colorspace = 3 // RGB: the PNG encoder drops an opaque alpha
		}
		s.Value = append(s.Value, &tbpb.Summary_Value{Tag: im.Tag, Value: &tbpb.Summary_Value_Image{Image: &tbpb.Summary_Image{
			Height: int32(r.Dy()), Width: int32(r.Dx()), Colorspace: colorspace, EncodedImageString: b.Bytes()}}})
	}
	w.check(w.write(&tbpb.Event{Step: step, What: &tbpb.Event_Summary{Summary: s}}))
}

// write appends events stamped now and flushes them to the file.
func (w *Writer) write(events ...*tbpb.Event) error {
	t := w.now()
	for _, e := range events {
		e.WallTime = float64(t.UnixNano()) / 1e9
		data, err := proto.Marshal(e)
		if err != nil {
			return err
		}
		if len(data) > maxRecord { // a resume could not read it back (rollBack)
			if w.warn != nil {
				w.warn(fmt.Sprintf("%s: a TensorBoard record of %d bytes (step %d) is over the %d a resume reads back: not written", w.path, len(data), e.Step, maxRecord))
			}
			continue
		}
		w.buf = appendRecord(w.buf[:0], data)
		if _, err := w.w.Write(w.buf); err != nil {
			return err
		}
	}
	return w.w.Flush()
}

func (w *Writer) check(err error) {
	if err != nil {
		w.fail(fmt.Errorf("%s: %w", w.path, err))
	}
}

// fail warns once and stops the writer.
func (w *Writer) fail(err error) {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	if w.warn != nil {
		w.warn(fmt.Sprintf("output.tensorboard: %v; training goes on without TensorBoard files", err))
		w.warn = nil
	}
}

// Close flushes and closes the file; it reports nothing (a failure was
// warned about).
func (w *Writer) Close() {
	if w.f == nil {
		return
	}
	err := w.w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err != nil && w.warn != nil {
		w.warn(fmt.Sprintf("output.tensorboard: %s: %v", w.path, err))
	}
}

// rollBack takes the records after step from out of every event file in
// dir, removing the files left with nothing but their version, and
// returns the largest time stamp in the names of those kept (0: none).
// A file's records after a damaged one (a crash mid-write) are dropped
// with it. Files are read record by record, twice when one is rewritten:
// memory holds the largest record (at most maxRecord), never a file.
func rollBack(dir string, from int64, warn func(string)) (latest int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), FilePrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		read, kept, steps := 0, 0, false
		damage, err := eachRecord(path, func(r []byte) error {
			read++
			if !after(r, from) {
				kept++
				steps = steps || holdsStep(r)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		switch {
		case !steps:
			if err := os.Remove(path); err != nil {
				return 0, err
			}
			continue
		case kept < read || damage != nil:
			if damage != nil && warn != nil {
				warn(fmt.Sprintf("%s: %v; the records from there on are dropped", path, damage))
			}
			err := outdir.WriteFile(path, func(out io.Writer) error {
				_, err := eachRecord(path, func(r []byte) error {
					if after(r, from) {
						return nil
					}
					return writeRecords(out, [][]byte{r})
				})
				return err
			})
			if err != nil {
				return 0, err
			}
		}
		latest = max(latest, nameStamp(e.Name()))
	}
	return latest, nil
}

// eachRecord calls fn with the data of each whole record of the event
// file at path, in order, one at a time. It stops at the first damaged
// record (cut short or failing a checksum), which it returns as damage;
// err is any other failure: the file (a regular file) cannot be read, or
// fn's error.
func eachRecord(path string, fn func(data []byte) error) (damage, err error) {
	f, size, err := infile.Open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rr := &recordReader{r: bufio.NewReaderSize(f, 64<<10), size: size}
	for {
		data, err := rr.next()
		switch {
		case err == io.EOF:
			return nil, nil
		case isDamage(err):
			return err, nil
		case err != nil:
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(data); err != nil {
			return nil, err
		}
	}
}

// after reports whether a record is an event after step from; a record
// that is not an Event is kept, as it is.
func after(record []byte, from int64) bool {
	var e tbpb.Event
	return proto.Unmarshal(record, &e) == nil && e.Step > from
}

// holdsStep reports whether a record holds a summary (or is not an
// Event: it is kept, as it is).
func holdsStep(record []byte) bool {
	var e tbpb.Event
	return proto.Unmarshal(record, &e) != nil || e.GetSummary() != nil
}

// nameStamp is the Unix time in an event file's name, 0 if none.
func nameStamp(name string) int64 {
	rest := strings.TrimPrefix(name, FilePrefix)
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		rest = rest[:i]
	}
	v, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt32*4 {
		return 0
	}
	return v
}
