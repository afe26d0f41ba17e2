package rundir

import (
	"io"
	"os"
	"strconv"
)

// terminalColumns is w's terminal width: asked of the terminal when w is
// one, else $COLUMNS, else 80.
func terminalColumns(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if n := fileColumns(f); n > 0 {
			return n
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}

// IsTerminal reports whether w is a character device (a terminal): what
// Options.Terminal says of Progress.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
