// Package infile reads the files a user names (configs, manifests,
// checkpoints, weights, images) with a bound: what is not a regular file
// (a FIFO, a device such as /dev/zero, a socket) is refused by name before
// a byte is read, and no read takes more than the caller's limit, so a
// link to an endless or huge file costs an error, not the machine's memory.
//
// Open and ReadFile follow symlinks (a data folder of links is ordinary);
// it is where the link leads that must be a regular file. Nothing is
// cached; the caller owns the *os.File Open returns.
package infile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Error is a file refused before or while reading it.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string { return e.Path + ": " + e.Reason }

// Open opens path for reading if it is a regular file of at most max bytes
// (max <= 0: any size), and returns its size. The check is made on the
// opened descriptor, and opening never blocks (O_NONBLOCK), so a FIFO is
// refused instead of waiting for a writer.
func Open(path string, max int64) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// A socket cannot be opened at all (ENXIO): say what it is.
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			return nil, 0, Check(path, st, max)
		}
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if err := Check(path, st, max); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Check refuses what st describes unless it is a regular file of at most
// max bytes (max <= 0: any size).
func Check(path string, st fs.FileInfo, max int64) error {
	if !st.Mode().IsRegular() {
		return &Error{Path: path, Reason: "not a regular file (" + Kind(st.Mode()) + "): name a file"}
	}
	if max > 0 && st.Size() > max {
		return &Error{Path: path, Reason: fmt.Sprintf("%d bytes, more than the %d such a file can hold", st.Size(), max)}
	}
	return nil
}

// ReadFile is os.ReadFile of a regular file of at most max bytes (max <=
// 0: any size); a file that grows past its size while read is cut there.
func ReadFile(path string, max int64) ([]byte, error) {
	f, size, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 0, size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF || len(b) > int(size) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(b)) > size {
		return nil, &Error{Path: path, Reason: fmt.Sprintf("grew past its %d bytes while being read", size)}
	}
	return b, nil
}

// Kind names a file mode's type: "a directory", "a named pipe (FIFO)",
// "a device", "a socket", "a symlink", "an irregular file" or "a file".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0, m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsRegular():
		return "a file"
	}
	return "an irregular file"
}
