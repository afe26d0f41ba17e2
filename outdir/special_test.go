//go:build unix

package outdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/internal/nodetest"
)

// stillSpecial fails the test unless path is still s's kind of node, and
// the folder holds no temporary file.
func stillSpecial(t *testing.T, s nodetest.Node, path, op string) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: the %s is gone: %v", op, s.Name, err)
	}
	if st.Mode().Type() != s.Mode {
		t.Fatalf("%s: the %s became %v", op, s.Name, st.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if IsTemp(e.Name()) {
			t.Errorf("%s: left %s", op, e.Name())
		}
	}
}

// refused fails the test unless err is a TargetError naming path and
// saying what is there.
func refused(t *testing.T, err error, path, what, op string) {
	t.Helper()
	var te *TargetError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), path+": is "+what+", ") {
		t.Errorf("%s: got %v, want a refusal naming %s as %s", op, err, path, what)
	}
}

// withinTime runs f and fails the test if it has not returned in 10 s: a
// write that opened a FIFO would wait for its reader for ever.
func withinTime(t *testing.T, op string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10 s (a FIFO opened?)", op)
		return nil
	}
}

// TestWritesRefuseDevicesAndFIFOs: every way outdir writes a file (and
// Acquire and Subfolder, which make folders) refuses a FIFO or a
// character device at its path, by name and without blocking, and leaves
// the node as it was with no temporary file beside it.
func TestWritesRefuseDevicesAndFIFOs(t *testing.T) {
	for _, s := range nodetest.Nodes() {
		t.Run(s.Name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out")
			s.Make(t, path)
			ops := []struct {
				name string
				want Kind
				run  func() error
			}{
				{"CheckTarget file", File, func() error { return CheckTarget(path, File) }},
				{"CheckTarget folder", Folder, func() error { return CheckTarget(path, Folder) }},
				{"CheckTarget either", FileOrFolder, func() error { return CheckTarget(path, FileOrFolder) }},
				{"WriteBytes", File, func() error { return WriteBytes(path, []byte("x")) }},
				{"WriteFile", File, func() error {
					return WriteFile(path, func(io.Writer) error { t.Error("WriteFile wrote"); return nil })
				}},
				{"Create", File, func() error {
					p, err := Create(path)
					if err == nil {
						p.Close()
					}
					return err
				}},
				{"Append", File, func() error {
					f, err := Append(path, false)
					if err == nil {
						f.Close()
					}
					return err
				}},
				{"Append truncate", File, func() error {
					f, err := Append(path, true)
					if err == nil {
						f.Close()
					}
					return err
				}},
				{"Acquire", Folder, func() error {
					l, err := Acquire(path, "memunet test")
					if err == nil {
						l.Release()
					}
					return err
				}},
				{"Subfolder", Folder, func() error { return Subfolder(path) }},
			}
			for _, op := range ops {
				err := withinTime(t, op.name, op.run)
				var te *TargetError
				if !errors.As(err, &te) || te.Want != op.want {
					t.Errorf("%s: got %v, want a TargetError for a %d", op.name, err, op.want)
				}
				refused(t, err, path, s.What, op.name)
				stillSpecial(t, s, path, op.name)
			}
		})
	}
}

// TestCommitRefusesANodeMadeMeanwhile: a FIFO or device made at the name
// while a Pending file is written is not replaced by Commit either.
func TestCommitRefusesANodeMadeMeanwhile(t *testing.T) {
	for _, s := range nodetest.Nodes() {
		t.Run(s.Name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "profile.out")
			p, err := Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.Write([]byte("data"))
			s.Make(t, path)
			refused(t, p.Commit(), path, s.What, "Commit")
			stillSpecial(t, s, path, "Commit")
		})
	}
}

// TestLinkToADeviceIsReplaced: a symlink at a file's path is replaced,
// never written through, whatever it points to: the device or FIFO it
// points to stays as it was, and so does the one a folder's link leads to,
// which is refused as a folder.
func TestLinkToADeviceIsReplaced(t *testing.T) {
	for _, s := range nodetest.Nodes() {
		t.Run(s.Name, func(t *testing.T) {
			dir := t.TempDir()
			node := filepath.Join(dir, "node")
			s.Make(t, node)
			link := filepath.Join(dir, "out")
			if err := os.Symlink(node, link); err != nil {
				t.Fatal(err)
			}
			if err := CheckTarget(link, File); err != nil {
				t.Errorf("CheckTarget of a link, as a file: %v", err)
			}
			if err := withinTime(t, "WriteBytes", func() error { return WriteBytes(link, []byte("x")) }); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() {
				t.Errorf("the link was not replaced by a file: %v, %v", st, err)
			}
			stillSpecial(t, s, node, "WriteBytes through a link")

			folder := filepath.Join(dir, "folder")
			if err := os.Symlink(node, folder); err != nil {
				t.Fatal(err)
			}
			_, err := Acquire(folder, "memunet test")
			refused(t, err, folder, s.What, "Acquire of a link to it")
			stillSpecial(t, s, node, "Acquire of a link to it")
		})
	}
}

// TestAcquireRefusesANodeAsItsLock: a FIFO or device planted as a folder's
// .lock is neither written with the holder's record nor waited on, with
// flock and with the lock-file way.
func TestAcquireRefusesANodeAsItsLock(t *testing.T) {
	for _, s := range nodetest.Nodes() {
		for _, useFlock := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s flock=%v", s.Name, useFlock), func(t *testing.T) {
				dir := t.TempDir()
				lock := filepath.Join(dir, LockName)
				s.Make(t, lock)
				err := withinTime(t, "Acquire", func() error {
					l, err := acquire(dir, "memunet test", useFlock)
					if err == nil {
						l.Release()
					}
					return err
				})
				refused(t, err, lock, s.What, "Acquire")
				stillSpecial(t, s, lock, "Acquire")
			})
		}
	}
}

// TestFileAndFolderMismatch: a folder where a file goes, and a file where
// a folder goes, are refused by name as such.
func TestFileAndFolderMismatch(t *testing.T) {
	dir := t.TempDir()
	err := WriteBytes(dir, []byte("x"))
	refused(t, err, dir, "a folder", "WriteBytes over a folder")
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(file, "memunet test")
	refused(t, err, file, "a regular file", "Acquire of a file")
	refused(t, Subfolder(file), file, "a regular file", "Subfolder of a file")
	for _, p := range []string{dir, file, filepath.Join(dir, "absent")} {
		if err := CheckTarget(p, FileOrFolder); err != nil {
			t.Errorf("CheckTarget(%s, FileOrFolder): %v", p, err)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("the file became %q", b)
	}
}

// TestJournalLeavesANodeItDidNotWrite: a cut-off write's Remove takes the
// regular files its journal lists, and leaves a FIFO, socket or device
// found at a listed name: the write made none.
func TestJournalLeavesANodeItDidNotWrite(t *testing.T) {
	for _, s := range nodetest.Nodes() {
		t.Run(s.Name, func(t *testing.T) {
			dir := t.TempDir()
			j, err := StartJournal(dir, "memunet test")
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Claim("a.png", "node.png"); err != nil {
				t.Fatal(err)
			}
			j.Close()
			if err := os.WriteFile(filepath.Join(dir, "a.png"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			node := filepath.Join(dir, "node.png")
			s.Make(t, node)
			u, err := ReadJournal(dir)
			if err != nil || u == nil {
				t.Fatalf("ReadJournal: %v, %v", u, err)
			}
			if err := u.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "a.png")); !os.IsNotExist(err) {
				t.Errorf("a.png, written and listed, is still there: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, JournalName)); !os.IsNotExist(err) {
				t.Errorf("the journal is still there: %v", err)
			}
			stillSpecial(t, s, node, "Unfinished.Remove")
		})
	}
}
