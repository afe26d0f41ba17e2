//go:build linux || darwin || freebsd || netbsd || openbsd

package rundir

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileColumns is the width of the terminal f is, or 0.
func fileColumns(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
