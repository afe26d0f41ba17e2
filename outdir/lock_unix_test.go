//go:build unix

package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A lock file its holder removed (Clear) between another writer's open
// and its flock is not taken for held: that writer locks anew.
func TestFlockOfARemovedLockFile(t *testing.T) {
	dir := t.TempDir()
	first, err := Acquire(dir, "memunet train")
	if err != nil {
		t.Fatal(err)
	}
	opened, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	first.Clear()
	if _, err := flockOpened(dir, opened, Holder{PID: os.Getpid()}); !errors.Is(err, errLockRemoved) {
		t.Fatalf("locking the removed lock file: %v, want errLockRemoved", err)
	}
	l, err := Acquire(dir, "memunet train")
	if err != nil {
		t.Fatalf("after an abandon: %v", err)
	}
	l.Release()
}
