package outdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Subfolder makes the folder path inside an output folder (its parent
// made as needed), or accepts the real folder already there. A link at
// path is refused, never followed: one planted at RUN/checkpoints or
// RUN/tb would carry a locked run's writes outside its folder.
func Subfolder(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := NotALink(path); err != nil {
		return err
	}
	if st, err := os.Stat(path); err != nil {
		return err
	} else if !st.IsDir() {
		return &TargetError{Path: path, Mode: st.Mode(), Want: Folder}
	}
	return nil
}

// NotALink refuses a link at path (a folder an output folder holds), and
// passes anything else, or nothing there.
func NotALink(path string) error {
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	target, _ := os.Readlink(path)
	return fmt.Errorf("%s is a link (to %s), not a folder: memunet writes only inside its output folder, so it does not follow it; remove the link (rm %s) or write to another folder",
		path, target, path)
}
