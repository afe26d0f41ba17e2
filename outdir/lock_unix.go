//go:build unix

package outdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	noFollow = unix.O_NOFOLLOW
	// nonBlock opens a FIFO without waiting for its other end, so that
	// one planted where a file goes is refused instead of hanging.
	nonBlock = unix.O_NONBLOCK
)

// acquireFlock holds dir/.lock with flock(2); errNoFlock where the file
// system has none.
func acquireFlock(dir string, me Holder) (*Lock, error) {
	for try := 0; ; try++ {
		l, err := flockOnce(dir, me)
		if !errors.Is(err, errLockRemoved) || try == 2 {
			return l, err
		}
	}
}

// errLockRemoved is a lock file that its holder removed (Clear) between
// our opening it and our flock: the lock is on a file no one else will
// open, so it must be taken again.
var errLockRemoved = errors.New("the lock file was removed while being locked")

func flockOnce(dir string, me Holder) (*Lock, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow|nonBlock, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkOpened(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return flockOpened(dir, f, me)
}

// flockOpened locks f, the lock file of dir just opened, and takes it
// unless it is no longer dir's lock file. f is closed on any error.
func flockOpened(dir string, f *os.File, me Holder) (*Lock, error) {
	path := filepath.Join(dir, LockName)
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		switch {
		case errors.Is(err, unix.EWOULDBLOCK):
			// The holder may be between taking the lock and writing its
			// record (the file is empty then): give it a moment.
			h, rerr := readHolder(path)
			for try := 0; rerr != nil && try < 20; try++ {
				time.Sleep(10 * time.Millisecond)
				h, rerr = readHolder(path)
			}
			if rerr != nil {
				h = Holder{Command: "another process"}
			}
			return nil, &InUseError{Dir: dir, Holder: h}
		case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
			return nil, errNoFlock
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if held, err := f.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	} else if now, err := os.Lstat(path); err != nil || !os.SameFile(held, now) {
		f.Close()
		return nil, errLockRemoved
	}
	// Held: record who holds it, over the previous holder's record.
	err := f.Truncate(0)
	if err == nil {
		_, err = f.Seek(0, 0)
	}
	if err == nil {
		err = writeHolder(f, me)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Lock{dir: dir, file: f, kind: "flock"}, nil
}

// running reports whether a process pid runs on this host.
func running(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
