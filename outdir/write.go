package outdir

import (
	"bufio"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// WriteFile writes path whole or not at all: write fills a temporary file
// made new in path's folder, which is synced and renamed over path. A
// symlink at path is replaced, never written through; anything else there
// that is not a regular file (a device, a FIFO, a socket, a folder) is
// refused before anything is written (CheckTarget). On any error path is as
// it was and the temporary file is gone.
func WriteFile(path string, write func(io.Writer) error) error {
	p, err := Create(path)
	if err != nil {
		return err
	}
	defer p.Close()
	bw := bufio.NewWriterSize(p, 1<<16)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return p.Commit()
}

// Pending is a file being written whole or not at all: a temporary file in
// its folder until Commit renames it over its name.
type Pending struct {
	f    *os.File // nil once committed or closed
	path string
}

// Create starts writing path as WriteFile does, for output written while
// something else runs (a CPU profile): write to the Pending, then Commit.
// The temporary file is made at once, so an unwritable folder fails before
// anything runs. Close without Commit (deferred) removes it, leaving path
// as it was. A path that is not a regular file or a link is refused
// (CheckTarget) before the temporary file is made.
func Create(path string) (*Pending, error) {
	if err := CheckTarget(path, File); err != nil {
		return nil, err
	}
	f, err := createTemp(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	return &Pending{f: f, path: path}, nil
}

func (p *Pending) Write(b []byte) (int, error) {
	if p.f == nil {
		return 0, os.ErrClosed
	}
	return p.f.Write(b)
}

// Commit syncs the file and renames it over path (a symlink there is
// replaced, never written through), then syncs the folder. On an error
// path is as it was and the temporary file is gone.
func (p *Pending) Commit() error {
	if p.f == nil {
		return os.ErrClosed
	}
	f, tmp := p.f, p.f.Name()
	p.f = nil
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		// Again just before the rename: a device or FIFO made at the
		// name while the file was written must not be replaced either.
		err = CheckTarget(p.path, File)
	}
	if err == nil {
		err = os.Rename(tmp, p.path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(p.path))
}

// Close removes the temporary file unless Commit has renamed it.
func (p *Pending) Close() error {
	if p.f == nil {
		return nil
	}
	f := p.f
	p.f = nil
	f.Close()
	return os.Remove(f.Name())
}

// tempMark is in the name of every temporary file WriteFile makes:
// .NAME.tmp-RANDOM, RANDOM a uint32 in decimal (as os.CreateTemp made
// them, so that a file left by an earlier version is still known).
const tempMark = ".tmp-"

const (
	// maxNameBytes is the longest file name the file systems memunet
	// writes to take (NAME_MAX, in bytes).
	maxNameBytes = 255
	// maxRandomDigits is the longest RANDOM: a uint32 has 10 digits.
	maxRandomDigits = 10
)

// tempName is the temporary name of a file named base, with random r:
// .NAME.tmp-R, NAME cut short (at a character's start, so it stays
// readable) where the whole would pass maxNameBytes, so that any name a
// file may have can be written (a 250-byte name's temporary name once
// failed with "file name too long").
func tempName(base string, r uint32) string {
	keep := maxNameBytes - len(".") - len(tempMark) - maxRandomDigits
	if len(base) > keep {
		cut := keep
		for back := 0; back < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(base[cut]); back++ {
			cut--
		}
		base = base[:cut]
	}
	return "." + base + tempMark + strconv.FormatUint(uint64(r), 10)
}

// createTemp makes a new temporary file for base in dir (O_EXCL: never
// one already there, nor through a link), as os.CreateTemp does but
// without its pattern language: a '*' in base is the name's own.
func createTemp(dir, base string) (*os.File, error) {
	for try := 0; ; try++ {
		f, err := os.OpenFile(filepath.Join(dir, tempName(base, rand.Uint32())), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

// IsTemp reports whether a file name is one of WriteFile's temporary
// files, which only a process killed mid-write leaves behind: a dot, a
// name, tempMark and a uint32 in decimal, nothing after it, so that a
// user's file that merely holds ".tmp-" (.notes.tmp-draft) is never taken
// for one and removed.
func IsTemp(name string) bool {
	i := strings.LastIndex(name, tempMark)
	if !strings.HasPrefix(name, ".") || i < 1 {
		return false
	}
	_, err := strconv.ParseUint(name[i+len(tempMark):], 10, 32) // digits only, no sign
	return err == nil
}

// Append opens path to append records to, a log written as it goes (a
// run's metrics.jsonl), creating it, or emptying it first with truncate. A
// symlink at path is refused (O_NOFOLLOW), never written through, and so
// is anything else that is not a regular file (CheckTarget): looked at
// before it is opened, as opening a device may act on it, and checked
// again on the descriptor, opened without blocking so that a FIFO swapped
// in meanwhile cannot hang the command waiting for a reader.
func Append(path string, truncate bool) (*os.File, error) {
	if err := CheckTarget(path, File); err != nil {
		return nil, err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND | noFollow | nonBlock
	if truncate {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, err
	}
	if err := checkOpened(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// WriteBytes is WriteFile of b.
func WriteBytes(path string, b []byte) error {
	return WriteFile(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WritePNG is WriteFile of img encoded as PNG; an error names path.
func WritePNG(path string, img image.Image) error {
	if err := WriteFile(path, func(w io.Writer) error { return png.Encode(w, img) }); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// SyncDir makes a folder's entries (a rename into it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// Resolve is path made absolute with its symlinks followed; a path that
// does not exist yet resolves through its nearest existing parent.
func Resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	var rest []string
	for p := abs; ; {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// Within reports whether path is dir or inside it, both resolved.
func Within(path, dir string) bool {
	rel, err := filepath.Rel(Resolve(dir), Resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
