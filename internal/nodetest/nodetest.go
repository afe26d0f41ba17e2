//go:build unix

// Package nodetest makes the nodes no output may replace or feed, a FIFO,
// a character device and a socket, where a test names. Only tests import
// it.
package nodetest

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Node is a kind of node a test makes.
type Node struct {
	Name string      // "FIFO", "character device", "socket"
	What string      // as outdir's refusal says it
	Mode fs.FileMode // its type bits
	make func(path string) error
}

// Nodes are a FIFO, a character device with the null device's numbers (a
// write that did reach it would be lost, not harm anything) and a socket.
func Nodes() []Node {
	return []Node{
		{"FIFO", "a named pipe (FIFO)", fs.ModeNamedPipe, func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"character device", "a character device", fs.ModeDevice | fs.ModeCharDevice, func(p string) error {
			return syscall.Mknod(p, syscall.S_IFCHR|0o644, int(unix.Mkdev(1, 3)))
		}},
		{"socket", "a socket", fs.ModeSocket, func(p string) error {
			fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer syscall.Close(fd)
			return syscall.Bind(fd, &syscall.SockaddrUnix{Name: p}) // the file stays once closed
		}},
	}
}

// Make makes n at path, skipping t where the system refuses: mknod(2) of
// a device needs root or CAP_MKNOD.
func (n Node) Make(t testing.TB, path string) {
	t.Helper()
	if err := n.make(path); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOTSUP) {
			t.Skipf("cannot make a %s here (%v): mknod(2) needs root or CAP_MKNOD", n.Name, err)
		}
		t.Fatal(err)
	}
}
