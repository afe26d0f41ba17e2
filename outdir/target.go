package outdir

import (
	"fmt"
	"io/fs"
	"os"
)

// Kind is what an output path must be where something is there already.
type Kind int

const (
	// File is a regular file, replaced whole (WriteFile, Create, Append).
	// A symlink there is fine: it is replaced, never written through, so
	// whatever it points to (a device included) is left as it is.
	File Kind = iota + 1
	// Folder is a directory (Acquire, Subfolder); a link to one is
	// followed, as Acquire follows it, so it is where it leads that counts.
	Folder
	// FileOrFolder is either, for a check made before the caller tells
	// which (checkpoint.CheckOutside serves predict's folder and export's
	// file): only what is neither is refused.
	FileOrFolder
)

// TargetError is an output path where something is that memunet must not
// replace or write into: a device, a FIFO, a socket, or a file where a
// folder goes (or the reverse). Renaming a file over a device node or a
// FIFO would remove it (as root, --out /dev/null would destroy /dev/null
// for the machine), and writing into one would feed it.
type TargetError struct {
	Path string
	Mode fs.FileMode // what is there
	Want Kind
}

func (e *TargetError) Error() string {
	what := describe(e.Mode)
	switch e.Want {
	case Folder:
		return fmt.Sprintf("%s: is %s, not a folder; give a folder memunet may create or write into", e.Path, what)
	case File:
		return fmt.Sprintf("%s: is %s, not a regular file; give a path to a file memunet may create or replace", e.Path, what)
	}
	return fmt.Sprintf("%s: is %s, not a regular file or folder; give a path memunet may create or replace", e.Path, what)
}

// describe names a file mode's type for a TargetError.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file (" + m.Type().String() + ")"
}

// CheckTarget refuses, by name and before anything is written, an output
// path that exists and is not what want says (a *TargetError): a device, a
// FIFO or a socket always; a folder where a file goes; a file where a
// folder goes. Nothing there passes (it will be made), and so does a path
// that cannot be looked at (the write itself then says why). Commands call
// it on their --out before any work; Create, Append and Acquire call it
// again as the last check before they write.
func CheckTarget(path string, want Kind) error {
	st, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	m := st.Mode()
	if m&fs.ModeSymlink != 0 {
		if want == File {
			return nil // replaced, never written through
		}
		if st, err = os.Stat(path); err != nil {
			return nil // a dangling link: making the folder fails with its own reason
		}
		m = st.Mode()
	}
	if ok(m, want) {
		return nil
	}
	return &TargetError{Path: path, Mode: m, Want: want}
}

// ok reports whether a file of mode m (not a link) may be replaced or
// written into as want.
func ok(m fs.FileMode, want Kind) bool {
	switch want {
	case File:
		return m.IsRegular()
	case Folder:
		return m.IsDir()
	}
	return m.IsRegular() || m.IsDir()
}

// checkOpened refuses a file just opened for writing (at path) that is not
// a regular file: what CheckTarget passed may have been swapped since.
func checkOpened(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return &TargetError{Path: path, Mode: st.Mode(), Want: File}
	}
	return nil
}
