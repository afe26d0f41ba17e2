package checkpoint

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// Prefixes of the directories a checkpoint passes through: written under
// TempPrefix, renamed to its final name when complete; deleted by renaming it
// to TrashPrefix first. Neither is ever taken for a checkpoint.
const (
	TempPrefix  = ".tmp-"
	TrashPrefix = ".trash-"
)

// Kinds of refusal, for errors.Is on an *Error.
var (
	ErrNotFound   = errors.New("no such checkpoint")
	ErrIncomplete = errors.New("incomplete checkpoint")
	ErrMissing    = errors.New("missing file")
	ErrTruncated  = errors.New("truncated file")
	ErrCorrupt    = errors.New("corrupt file")
	ErrFormat     = errors.New("unreadable checkpoint")
	ErrMismatch   = errors.New("architecture mismatch")
)

// Error is a refused checkpoint: the directory, the kind and what is wrong.
type Error struct {
	Dir    string
	Kind   error
	Detail string
}

func (e *Error) Error() string { return fmt.Sprintf("checkpoint %s: %s", e.Dir, e.Detail) }
func (e *Error) Unwrap() error { return e.Kind }

func refuse(dir string, kind error, format string, args ...any) *Error {
	return &Error{Dir: dir, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Sum is a file's size and SHA-256 as the manifest records them.
type Sum struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Part is one data file of a checkpoint: its name and how to write it.
type Part struct {
	Name  string
	Write func(w io.Writer) error
}

// FaultHook, when set, is called at every point of a write or removal where
// a crash would leave a different state on disk (crash tests kill the
// process from it). It is nil in normal use.
var FaultHook func(point string)

func fault(point string) {
	if FaultHook != nil {
		FaultHook(point)
	}
}

// Save writes a checkpoint directory parent/name atomically: the parts and
// then the manifest (made by manifest from the parts' sums) go into a new
// temporary directory under parent, every file is fsynced, the directory is
// fsynced and renamed to name, and parent is fsynced. A crash at any moment
// leaves either no parent/name or a complete one. An existing parent/name is
// never replaced: Save fails instead (see NextName).
func Save(parent, name string, parts []Part, manifest func(sums map[string]Sum) ([]byte, error)) (string, error) {
	if err := outdir.Subfolder(parent); err != nil {
		return "", fmt.Errorf("checkpoint directory: %w", err)
	}
	final := filepath.Join(parent, name)
	if _, err := os.Lstat(final); err == nil {
		return "", fmt.Errorf("checkpoint %s already exists; not replacing it", final)
	}
	tmp, err := os.MkdirTemp(parent, TempPrefix+name+"-")
	if err != nil {
		return "", fmt.Errorf("checkpoint directory: %w", err)
	}
	fault("tmpdir")
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	sums := map[string]Sum{}
	for _, p := range parts {
		if p.Name == runfiles.Manifest || p.Name == runfiles.ManifestSum || strings.ContainsAny(p.Name, `/\`) || p.Name == "" {
			return "", fmt.Errorf("checkpoint: invalid part name %q", p.Name)
		}
		s, err := writeFile(filepath.Join(tmp, p.Name), p.Write)
		if err != nil {
			return "", fmt.Errorf("writing checkpoint %s: %w", p.Name, err)
		}
		sums[p.Name] = s
	}
	man, err := manifest(sums)
	if err != nil {
		return "", err
	}
	if len(man) > MaxManifestBytes {
		return "", fmt.Errorf("checkpoint manifest of %d bytes is over the %d OpenDir reads", len(man), MaxManifestBytes)
	}
	ms, err := writeFile(filepath.Join(tmp, runfiles.Manifest), func(w io.Writer) error { _, err := w.Write(man); return err })
	if err != nil {
		return "", fmt.Errorf("writing checkpoint manifest: %w", err)
	}
	line := ms.SHA256 + "  " + runfiles.Manifest + "\n"
	if _, err := writeFile(filepath.Join(tmp, runfiles.ManifestSum), func(w io.Writer) error { _, err := io.WriteString(w, line); return err }); err != nil {
		return "", fmt.Errorf("writing checkpoint manifest checksum: %w", err)
	}
	if err := outdir.SyncDir(tmp); err != nil {
		return "", err
	}
	fault("synced")
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	ok = true
	fault("renamed")
	if err := outdir.SyncDir(parent); err != nil {
		return final, err
	}
	fault("done")
	return final, nil
}

// faultWriter calls the fault hook before every write.
type faultWriter struct {
	w    io.Writer
	name string
	n    int
}

func (f *faultWriter) Write(p []byte) (int, error) {
	f.n++
	fault("write " + f.name + " " + strconv.Itoa(f.n))
	return f.w.Write(p)
}

// writeFile creates path, writes it through write, fsyncs and closes it, and
// returns its size and SHA-256.
func writeFile(path string, write func(io.Writer) error) (Sum, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return Sum{}, err
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	var w io.Writer = cw
	if FaultHook != nil {
		w = &faultWriter{w: cw, name: filepath.Base(path)}
	}
	size := 1 << 16
	if FaultHook != nil {
		size = 4 << 10 // more writes, so that crash tests can stop inside a file
	}
	bw := bufio.NewWriterSize(w, size)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		fault("sync " + filepath.Base(path))
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Sum{}, err
	}
	return Sum{Bytes: cw.n, SHA256: hexSum(h)}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// Opened is a verified checkpoint: its manifest and data files, in memory.
type Opened struct {
	Dir      string
	Manifest []byte
	Files    map[string][]byte
}

// header is the part of a manifest Open checks.
type header struct {
	Format        string         `json:"format"`
	FormatVersion int            `json:"format_version"`
	Files         map[string]Sum `json:"files"`
}

// Format names the manifest format; FormatVersion is the newest version this
// package reads.
const (
	Format        = "memunet-checkpoint"
	FormatVersion = 1
)

// Bounds on what OpenDir reads before it can check anything: the manifest
// (a run's holds every step's loss, about 90 bytes a step, so 64 MiB is
// some 700,000 steps; Save refuses to write a larger one) and its checksum
// line. A data file is read at the size the manifest records, no more.
const (
	MaxManifestBytes    = 64 << 20
	MaxManifestSumBytes = 4 << 10
)

// OpenDir reads and verifies the checkpoint directory dir: the manifest's
// own SHA-256 (manifest.json.sha256), its format, and the presence, size
// and SHA-256 of every file it lists. Each problem is refused with an
// *Error naming it. Every file must be a regular file (a FIFO or a link to
// a device is refused before it is read) within its bound. Nothing bounds
// the sizes the manifest gives its files, so each is hashed streaming
// before it is read: a lying manifest (a sparse file of gigabytes) costs
// reading it, not memory. OpenDirWithin bounds them.
func OpenDir(dir string) (*Opened, error) { return OpenDirWithin(dir, nil) }

// Most is the most bytes each data file of a checkpoint may have, from
// its verified manifest: a file it does not name is refused. Its error is
// returned as is.
type Most func(manifest []byte) (map[string]int64, error)

// OpenDirWithin is OpenDir with the sizes the manifest gives its data
// files held to most's (nil: unbounded, as OpenDir) before any is read;
// each file is then read once, hashed as it is read.
func OpenDirWithin(dir string, most Most) (*Opened, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, refuse(dir, ErrNotFound, "does not exist")
	case err != nil:
		return nil, refuse(dir, ErrNotFound, "%v", err)
	case !st.IsDir():
		return nil, refuse(dir, ErrNotFound, "is not a directory (a checkpoint is a directory holding %s)", runfiles.Manifest)
	}
	if strings.HasPrefix(filepath.Base(dir), TempPrefix) {
		return nil, refuse(dir, ErrIncomplete, "is a partial checkpoint left by an interrupted write (%s*); use a complete one", TempPrefix)
	}
	man, err := infile.ReadFile(filepath.Join(dir, runfiles.Manifest), MaxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refuse(dir, ErrMissing, "%s is missing: this is not a complete checkpoint", runfiles.Manifest)
	} else if err != nil {
		return nil, refuse(dir, ErrFormat, "reading %s: %v", runfiles.Manifest, err)
	}
	sumLine, err := infile.ReadFile(filepath.Join(dir, runfiles.ManifestSum), MaxManifestSumBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refuse(dir, ErrMissing, "%s is missing, so the manifest cannot be verified", runfiles.ManifestSum)
	} else if err != nil {
		return nil, refuse(dir, ErrFormat, "reading %s: %v", runfiles.ManifestSum, err)
	}
	want, _, _ := strings.Cut(strings.TrimSpace(string(sumLine)), " ")
	got := sha256.Sum256(man)
	if len(want) != 64 {
		return nil, refuse(dir, ErrCorrupt, "%s is corrupt: it does not hold a SHA-256", runfiles.ManifestSum)
	}
	if hex.EncodeToString(got[:]) != want {
		return nil, refuse(dir, ErrCorrupt, "%s is corrupt: its SHA-256 is %s, %s says %s",
			runfiles.Manifest, short(hex.EncodeToString(got[:])), runfiles.ManifestSum, short(want))
	}
	var h header
	if err := json.Unmarshal(man, &h); err != nil {
		return nil, refuse(dir, ErrFormat, "%s: %v", runfiles.Manifest, err)
	}
	if h.Format != Format {
		return nil, refuse(dir, ErrFormat, "%s: format %q is not %q", runfiles.Manifest, h.Format, Format)
	}
	if h.FormatVersion < 1 || h.FormatVersion > FormatVersion {
		return nil, refuse(dir, ErrFormat, "format version %d; this memunet reads version %d (written by a newer memunet?)", h.FormatVersion, FormatVersion)
	}
	names := make([]string, 0, len(h.Files))
	for n := range h.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	var limits map[string]int64
	if most != nil {
		if limits, err = most(man); err != nil {
			return nil, err
		}
	}
	o := &Opened{Dir: dir, Manifest: man, Files: map[string][]byte{}}
	for _, n := range names {
		s := h.Files[n]
		if n == "" || strings.ContainsAny(n, `/\`) || n == "." || n == ".." {
			return nil, refuse(dir, ErrFormat, "%s lists an invalid file name %q", runfiles.Manifest, n)
		}
		if most != nil {
			limit, ok := limits[n]
			if !ok {
				return nil, refuse(dir, ErrFormat, "%s lists %s, which this kind of checkpoint does not hold", runfiles.Manifest, n)
			}
			if s.Bytes > limit {
				return nil, refuse(dir, ErrCorrupt, "%s: %s gives it %d bytes, more than the %d the checkpoint's configuration needs at most; not reading it",
					n, runfiles.Manifest, s.Bytes, limit)
			}
		}
		b, err := readSized(dir, n, s, most != nil)
		if err != nil {
			return nil, err
		}
		o.Files[n] = b
	}
	return o, nil
}

// readSized reads the data file name of the checkpoint in dir, which the
// manifest says is s.Bytes long with SHA-256 s.SHA256: a file of another
// size is refused before its bytes are read. Unless its size is bounded
// (by OpenDirWithin), the file is first hashed streaming, so that memory
// is taken only for bytes that verify; then it is read, hashed again as
// it is read (it may have changed between).
func readSized(dir, name string, s Sum, bounded bool) ([]byte, error) {
	f, size, err := infile.Open(filepath.Join(dir, name), 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refuse(dir, ErrMissing, "%s is missing (the manifest lists it: %d bytes)", name, s.Bytes)
	} else if err != nil {
		return nil, refuse(dir, ErrFormat, "reading %s: %v", name, err)
	}
	defer f.Close()
	if size < s.Bytes {
		return nil, refuse(dir, ErrTruncated, "%s is truncated: %d bytes, the manifest says %d", name, size, s.Bytes)
	}
	if size > s.Bytes {
		return nil, refuse(dir, ErrCorrupt, "%s is corrupt: %d bytes, the manifest says %d", name, size, s.Bytes)
	}
	verify := func(read func(io.Reader) error) error {
		h := sha256.New()
		if err := read(io.TeeReader(io.LimitReader(f, s.Bytes), h)); err != nil {
			return refuse(dir, ErrTruncated, "%s is truncated: reading its %d bytes: %v", name, s.Bytes, err)
		}
		if got := hexSum(h); got != s.SHA256 {
			return refuse(dir, ErrCorrupt, "%s is corrupt: its SHA-256 is %s, the manifest says %s", name, short(got), short(s.SHA256))
		}
		return nil
	}
	if !bounded {
		err := verify(func(r io.Reader) error {
			n, err := io.Copy(io.Discard, r)
			if err == nil && n < s.Bytes {
				err = io.ErrUnexpectedEOF
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, refuse(dir, ErrFormat, "reading %s: %v", name, err)
		}
	}
	b := make([]byte, s.Bytes)
	if err := verify(func(r io.Reader) error { _, err := io.ReadFull(r, b); return err }); err != nil {
		return nil, err
	}
	return b, nil
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

// Entry is a complete checkpoint directory in a parent directory.
type Entry struct {
	Name string
	Path string
	Step int
	Seq  int // 1 for step-00000012, n for step-00000012-n
}

// NextName is the name for a new checkpoint at step in parent: step-NNNNNNNN,
// or with the next free -n suffix when one for that step exists already
// (training resumed from an older checkpoint), so that nothing is replaced.
func NextName(parent string, step int) (string, error) {
	list, err := List(parent)
	if err != nil {
		return "", err
	}
	seq := 1
	for _, e := range list {
		if e.Step == step && e.Seq >= seq {
			seq = e.Seq + 1
		}
	}
	for {
		name := runfiles.CheckpointName(step, seq)
		if _, err := os.Lstat(filepath.Join(parent, name)); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
		seq++
	}
}

// List returns the checkpoint directories in parent from oldest to newest
// (by step, then sequence). Temporary and trashed directories are not
// listed; a missing parent gives none.
func List(parent string) ([]Entry, error) {
	des, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		step, seq, ok := runfiles.ParseCheckpointName(de.Name())
		if !ok || !de.IsDir() {
			continue
		}
		out = append(out, Entry{Name: de.Name(), Path: filepath.Join(parent, de.Name()), Step: step, Seq: seq})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Step != out[j].Step {
			return out[i].Step < out[j].Step
		}
		return out[i].Seq < out[j].Seq
	})
	return out, nil
}

// Remove deletes a checkpoint directory: it is first renamed to a trash name
// (atomically, so that a crash never leaves a half-deleted checkpoint under
// its name), then removed.
func Remove(path string) error {
	parent, name := filepath.Split(path)
	trash, err := os.MkdirTemp(parent, TrashPrefix+name+"-")
	if err != nil {
		return err
	}
	dst := filepath.Join(trash, name)
	if err := os.Rename(path, dst); err != nil {
		os.Remove(trash)
		return err
	}
	fault("trashed")
	if err := outdir.SyncDir(filepath.Clean(parent)); err != nil {
		return err
	}
	return os.RemoveAll(trash)
}

// CleanUp removes what interrupted writes and removals left in parent:
// temporary and trash directories. Complete checkpoints are not touched.
func CleanUp(parent string) error {
	des, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, de := range des {
		if n := de.Name(); strings.HasPrefix(n, TempPrefix) || strings.HasPrefix(n, TrashPrefix) {
			if err := os.RemoveAll(filepath.Join(parent, n)); err != nil {
				return err
			}
		}
	}
	return nil
}
