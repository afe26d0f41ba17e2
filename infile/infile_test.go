package infile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.png")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.png")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct{ path, kind string }{
		{fifo, "named pipe"},
		{sock, "socket"},
		{zero, "device"},
		{dir, "directory"},
	} {
		_, err := ReadFile(tc.path, 1<<20)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.kind) {
			t.Errorf("%s: %v, want an error naming it as a %s", tc.path, err, tc.kind)
		}
	}
}

func TestLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifest.json")
	os.WriteFile(path, []byte("0123456789"), 0o644)
	if b, err := ReadFile(path, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("at the limit: %q %v", b, err)
	}
	if b, err := ReadFile(path, 0); err != nil || len(b) != 10 {
		t.Fatalf("no limit: %q %v", b, err)
	}
	_, err := ReadFile(path, 9)
	if err == nil || !strings.Contains(err.Error(), "10 bytes, more than the 9") {
		t.Fatalf("past the limit: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o644)
	if b, err := ReadFile(empty, 9); err != nil || len(b) != 0 {
		t.Fatalf("empty: %q %v", b, err)
	}
}
