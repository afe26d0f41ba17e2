package tensorboard

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/tensorboard/tbtest"
)

// clock is a fake time: every call one millisecond later, from a fixed
// second, so that two writers in one test share a second.
func clock() func() time.Time {
	t := time.Unix(1_800_000_000, 0)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func scalarsAt(step int64) []Scalar {
	return []Scalar{{"train/loss", 1 / float64(step)}, {"train/lr", 1e-3}, {"memory/allocated_bytes", float64(step << 20)}}
}

// stepsByTag lists, per tag, the steps it has values at, over all files in
// name order.
func stepsByTag(ev tbtest.Events) map[string][]int64 {
	out := map[string][]int64{}
	for _, f := range ev.Files {
		for _, e := range f.Events {
			for _, v := range e.Values {
				out[v.Tag] = append(out[v.Tag], e.Step)
			}
		}
	}
	return out
}

// TestWriterReadBackIndependently: the Python reader verifies every
// record's CRC and finds the file version first, then each scalar at its
// step as the float32 of what was written, and the images as PNGs of their
// size.
func TestWriterReadBackIndependently(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb")
	var warnings []string
	w := open(dir, 0, func(s string) { warnings = append(warnings, s) }, clock())
	for step := int64(1); step <= 5; step++ {
		w.Scalars(step, scalarsAt(step))
	}
	img := image.NewRGBA(image.Rect(0, 0, 12, 7))
	img.Set(3, 2, color.RGBA{R: 200, A: 255})
	gray := image.NewGray(image.Rect(0, 0, 5, 4))
	w.Images(5, []Image{{"val/prediction/0", img}, {"val/prediction/1", gray}})
	w.Close()
	if len(warnings) > 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	ev := tbtest.Read(t, dir)
	if len(ev.Files) != 1 || !strings.HasPrefix(ev.Files[0].Name, FilePrefix+"1800000000.") {
		t.Fatalf("files %+v", ev.Files)
	}
	events := ev.Files[0].Events
	if len(events) != 7 || events[0].FileVersion != fileVersion || events[0].Step != 0 {
		t.Fatalf("%d events, first %+v", len(events), events[0])
	}
	for i, e := range events[1:6] {
		step := int64(i + 1)
		if e.Step != step || e.WallTime < 1_800_000_000 || e.WallTime > 1_800_000_001 {
			t.Errorf("event %d: step %d, wall time %f", i+1, e.Step, e.WallTime)
		}
		want := scalarsAt(step)
		if len(e.Values) != len(want) {
			t.Fatalf("step %d: %d values", step, len(e.Values))
		}
		for j, v := range e.Values {
			if v.Tag != want[j].Tag || v.SimpleValue == nil || *v.SimpleValue != float64(float32(want[j].Value)) {
				t.Errorf("step %d: %+v, want %s = %g", step, v, want[j].Tag, float32(want[j].Value))
			}
		}
	}
	imgs := events[6].Values
	if events[6].Step != 5 || len(imgs) != 2 || imgs[0].Image == nil || imgs[0].Image.Width != 12 || imgs[0].Image.Height != 7 ||
		imgs[0].Image.Colorspace != 4 || imgs[1].Image.Colorspace != 3 || imgs[1].Image.PNGBytes == 0 {
		t.Errorf("images: %+v", events[6])
	}
}

// TestResumeKeepsEachStepOnce: a run resumed at an earlier step (as from
// a checkpoint before the crash) leaves every step once in the folder: the
// old file cut at the resume step, a new one that sorts after it and
// starts with a SessionLog START at the next step; resuming again at the
// same step replaces that file (all its steps were after the resume step).
func TestResumeKeepsEachStepOnce(t *testing.T) {
	dir := t.TempDir()
	now := clock()
	w := open(dir, 0, nil, now)
	for step := int64(1); step <= 10; step++ {
		w.Scalars(step, scalarsAt(step))
	}
	w.Close()
	for round := range 2 {
		w = open(dir, 6, nil, now)
		for step := int64(7); step <= 12; step++ {
			w.Scalars(step, scalarsAt(step))
		}
		w.Close()
		ev := tbtest.Read(t, dir)
		if len(ev.Files) != 2 {
			t.Fatalf("round %d: %d files", round, len(ev.Files))
		}
		want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		for tag, steps := range stepsByTag(ev) {
			if !slices.Equal(steps, want) {
				t.Errorf("round %d: %s at steps %v, want %v", round, tag, steps, want)
			}
		}
		last := ev.Files[len(ev.Files)-1]
		if e := last.Events; len(e) < 2 || e[0].FileVersion == "" || e[1].SessionLog == nil || e[1].SessionLog.Status != 1 || e[1].Step != 7 {
			t.Errorf("round %d: the new file starts %+v", round, e[:2])
		}
		if !slices.IsSorted([]string{ev.Files[0].Name, last.Name}) || ev.Files[0].Name == last.Name {
			t.Errorf("round %d: the new file %s does not sort after %s", round, last.Name, ev.Files[0].Name)
		}
	}
}

// TestResumeDropsACutRecord: a file that ends inside a record (the writer
// was killed mid-write) is rewritten without it on resume.
func TestResumeDropsACutRecord(t *testing.T) {
	dir := t.TempDir()
	w := open(dir, 0, nil, clock())
	for step := int64(1); step <= 4; step++ {
		w.Scalars(step, scalarsAt(step))
	}
	w.Close()
	b, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.Path(), b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	var warned []string
	w = open(dir, 4, func(s string) { warned = append(warned, s) }, clock())
	w.Scalars(4, scalarsAt(4))
	w.Close()
	if len(warned) != 1 || !strings.Contains(warned[0], "the records from there on are dropped") {
		t.Errorf("the cut record was dropped with warnings %q; want one saying so", warned)
	}
	ev := tbtest.Read(t, dir)
	for tag, steps := range stepsByTag(ev) {
		if !slices.Equal(steps, []int64{1, 2, 3, 4}) {
			t.Errorf("%s at steps %v", tag, steps)
		}
	}
}

// TestNewRunEmptiesTheFolder: a new run (from 0) removes the event files
// of an earlier run in the folder.
func TestNewRunEmptiesTheFolder(t *testing.T) {
	dir := t.TempDir()
	w := open(dir, 0, nil, clock())
	w.Scalars(1, scalarsAt(1))
	w.Close()
	w = open(dir, 0, nil, clock())
	w.Scalars(1, scalarsAt(1))
	w.Close()
	files, _ := filepath.Glob(filepath.Join(dir, FilePrefix+"*"))
	if len(files) != 1 || files[0] != w.Path() {
		t.Fatalf("files %v, want only %s", files, w.Path())
	}
}

// TestUnwritableWarnsOnce: a folder that cannot be made, or a file that
// stops taking writes, gives one warning naming it and no panic; the
// writer then does nothing.
func TestUnwritableWarnsOnce(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(parent, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	warn := func(s string) { warnings = append(warnings, s) }
	w := Open(filepath.Join(parent, "tb"), 0, warn)
	for step := int64(1); step <= 3; step++ {
		w.Scalars(step, scalarsAt(step))
	}
	w.Close()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "output.tensorboard: "+filepath.Join(parent, "tb")) {
		t.Errorf("warnings %q", warnings)
	}

	warnings = nil
	w = open(t.TempDir(), 0, warn, clock())
	w.f.Close() // the disk goes away under the writer
	for step := int64(1); step <= 3; step++ {
		w.Scalars(step, scalarsAt(step))
	}
	w.Images(3, []Image{{"x", image.NewGray(image.Rect(0, 0, 2, 2))}})
	w.Close()
	if len(warnings) != 1 || !strings.Contains(warnings[0], w.Path()) {
		t.Errorf("warnings %q", warnings)
	}
}

// readRecords is every whole record in b, in order, up to the first that
// is cut short or damaged (its error), as rollBack reads a file.
func readRecords(b []byte) ([][]byte, error) {
	rr := &recordReader{r: bytes.NewReader(b), size: int64(len(b))}
	var out [][]byte
	for {
		data, err := rr.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, data)
	}
}

// TestRecordsRoundTrip: framing then reading gives the records back; a
// flipped byte anywhere is caught.
func TestRecordsRoundTrip(t *testing.T) {
	recs := [][]byte{{}, []byte("a"), bytes.Repeat([]byte("xyz"), 1000)}
	var b bytes.Buffer
	if err := writeRecords(&b, recs); err != nil {
		t.Fatal(err)
	}
	got, err := readRecords(b.Bytes())
	if err != nil || len(got) != len(recs) {
		t.Fatalf("%d records, %v", len(got), err)
	}
	for i := range recs {
		if !bytes.Equal(got[i], recs[i]) {
			t.Errorf("record %d differs", i)
		}
	}
	for i := range b.Len() {
		c := bytes.Clone(b.Bytes())
		c[i] ^= 1
		if got, err := readRecords(c); err == nil && len(got) == len(recs) {
			t.Fatalf("byte %d flipped: read back without an error", i)
		}
	}
}

// FuzzReadRecords: any bytes read without a panic, and the records read
// framed again are a prefix of the input.
func FuzzReadRecords(f *testing.F) {
	var b bytes.Buffer
	writeRecords(&b, [][]byte{[]byte("hello"), {}})
	f.Add(b.Bytes())
	f.Add([]byte{})
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, _ := readRecords(in)
		var out bytes.Buffer
		writeRecords(&out, recs)
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("records read from %x frame to %x", in, out.Bytes())
		}
	})
}

func ExampleWriter() {
	dir, _ := os.MkdirTemp("", "tb")
	defer os.RemoveAll(dir)
	w := Open(dir, 0, func(warning string) { fmt.Println(warning) })
	w.Scalars(1, []Scalar{{Tag: "train/loss", Value: 0.5}})
	w.Close()
	fmt.Println(strings.HasPrefix(filepath.Base(w.Path()), FilePrefix))
	// Output: true
}
