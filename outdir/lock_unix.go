//go:build unix

package outdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

const noFollow = unix.O_NOFOLLOW

// acquireFlock holds dir/.lock with flock(2); errNoFlock where the file
// system has none.
func acquireFlock(dir string, me Holder) (*Lock, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		switch {
		case errors.Is(err, unix.EWOULDBLOCK):
			h, rerr := readHolder(path)
			if rerr != nil {
				h = Holder{Command: "another process"}
			}
			return nil, &InUseError{Dir: dir, Holder: h}
		case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
			return nil, errNoFlock
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// Held: record who holds it, over the previous holder's record.
	err = f.Truncate(0)
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
