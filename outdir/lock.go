package outdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LockName is the lock file in every locked folder.
const LockName = ".lock"

// Holder is who holds a folder's lock, as its lock file records.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

// String is "memunet train (pid 1234 on host-a, since 13:23:01)".
func (h Holder) String() string {
	command := h.Command
	if command == "" {
		command = "another process"
	}
	if h.PID == 0 {
		return command // its record could not be read
	}
	since := h.Since.Local().Format("15:04:05")
	if time.Since(h.Since) > 24*time.Hour {
		since = h.Since.Local().Format("2006-01-02 15:04:05")
	}
	return fmt.Sprintf("%s (pid %d on %s, since %s)", command, h.PID, h.Host, since)
}

// InUseError is a folder another process holds.
type InUseError struct {
	Dir    string
	Holder Holder
	// Stale is set where the lock is a lock file (no flock) whose holder
	// cannot be checked from here (another host): it may be left over.
	Stale bool
}

func (e *InUseError) Error() string {
	msg := fmt.Sprintf("%s is in use by %s: wait for it to finish, or choose another --out", e.Dir, e.Holder)
	if e.Stale {
		msg += fmt.Sprintf("; if that process has ended, delete %s", filepath.Join(e.Dir, LockName))
	}
	return msg
}

// Lock is a held folder.
type Lock struct {
	dir     string
	file    *os.File // the flock'd descriptor, nil for a lock file
	kind    string
	created bool // Acquire made the folder
}

// Dir is the locked folder.
func (l *Lock) Dir() string { return l.dir }

// Kind says how the folder is held: "flock" or "lock file".
func (l *Lock) Kind() string { return l.kind }

// Acquire makes dir (and its parents) if needed and takes its lock for
// command (e.g. "memunet train"), or returns an *InUseError naming the
// process that holds it. It never waits.
func Acquire(dir, command string) (*Lock, error) {
	return acquire(dir, command, true)
}

// acquire is Acquire; without useFlock it takes the lock file's way, as on
// a file system without flock.
func acquire(dir, command string, useFlock bool) (*Lock, error) {
	if err := CheckTarget(dir, Folder); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	// The holder's record is written into the lock file: a device planted
	// there must be neither opened (opening may act on it) nor written.
	if err := CheckTarget(filepath.Join(dir, LockName), File); err != nil {
		return nil, err
	}
	me := Holder{PID: os.Getpid(), Host: hostname(), Command: command, Since: time.Now().Truncate(time.Second)}
	l, err := (*Lock)(nil), errNoFlock
	if useFlock {
		l, err = acquireFlock(dir, me)
	}
	if errors.Is(err, errNoFlock) {
		l, err = acquireFile(dir, me)
	}
	if l != nil {
		l.created = errors.Is(statErr, fs.ErrNotExist)
	}
	return l, err
}

// errNoFlock is a file system without flock(2).
var errNoFlock = errors.New("flock is not supported here")

// acquireFile takes the lock as a file made with O_EXCL; one left by a
// process of this host that no longer runs is removed and taken.
func acquireFile(dir string, me Holder) (*Lock, error) {
	path := filepath.Join(dir, LockName)
	for try := 0; ; try++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o644)
		if err == nil {
			err = writeHolder(f, me)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(path)
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return &Lock{dir: dir, kind: "lock file"}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		h, rerr := readHolder(path)
		if rerr != nil && try == 0 {
			// Its writer may be between creating and filling it.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if h.Host == me.Host && !running(h.PID) && try < 2 {
			os.Remove(path)
			continue
		}
		return nil, &InUseError{Dir: dir, Holder: h, Stale: h.Host != me.Host}
	}
}

// Release gives the folder back: a flock'd descriptor is closed (the file
// stays, holding the last holder's record; removing it would let two later
// writers lock two different files), a lock file is removed.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	if l.file != nil {
		err := l.file.Close()
		l.file = nil
		return err
	}
	if l.kind == "" {
		return nil
	}
	l.kind = ""
	return os.Remove(filepath.Join(l.dir, LockName))
}

// Clear releases the lock and leaves no trace of it: the lock file is
// removed while still held (a process that opened it meanwhile finds it
// removed and takes the lock anew), then the folder itself if Acquire made
// it and it is empty, as for a writer refused before it wrote anything.
// Release, by contrast, leaves the lock file with its last holder's record.
func (l *Lock) Clear() error {
	if l == nil || l.kind == "" {
		return nil
	}
	err := os.Remove(filepath.Join(l.dir, LockName))
	if l.file != nil {
		if cerr := l.file.Close(); err == nil {
			err = cerr
		}
		l.file = nil
	}
	l.kind = ""
	if l.created {
		os.Remove(l.dir) // only if empty
	}
	return err
}

func writeHolder(f *os.File, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// readHolder reads a lock file's record (a few hundred bytes at most).
func readHolder(path string) (Holder, error) {
	// Without blocking, and only a regular file: a FIFO planted as the
	// lock file must not hang the command, a device not be read.
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow|nonBlock, 0)
	if err != nil {
		return Holder{}, err
	}
	defer f.Close()
	if err := checkOpened(f, path); err != nil {
		return Holder{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return Holder{}, err
	}
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil {
		return Holder{}, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || strings.TrimSpace(h) == "" {
		return "this host"
	}
	return h
}
