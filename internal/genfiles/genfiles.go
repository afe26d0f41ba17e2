// Package genfiles is what memunet's go generate programs (opgen,
// docgen) share: finding the module's root, splicing a generated part
// between two marker lines of a hand-written file, and writing only the
// files whose contents change.
package genfiles

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ModuleRoot is the nearest folder at or above the working one that holds
// go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// Splice is src (the file rel) with the part from the line begin to the
// line end, both whole lines and included, replaced by part (which writes
// the marker lines again itself).
func Splice(rel string, src []byte, begin, end, part string) ([]byte, error) {
	s := string(src)
	i := indexLine(s, begin)
	j := -1
	if i >= 0 {
		if j = indexLine(s[i:], end); j >= 0 {
			j += i
		}
	}
	if i < 0 || j < 0 {
		return nil, fmt.Errorf("%s: the lines %q and %q, between which go generate writes, are missing", rel, begin, end)
	}
	return []byte(s[:i] + part + s[j+len(end):]), nil
}

// indexLine is the index of line, as a whole line, in s, or -1.
func indexLine(s, line string) int {
	for off := 0; off <= len(s); {
		i := strings.Index(s[off:], line)
		if i < 0 {
			return -1
		}
		i += off
		if (i == 0 || s[i-1] == '\n') && (i+len(line) == len(s) || s[i+len(line)] == '\n') {
			return i
		}
		off = i + 1
	}
	return -1
}

// Write writes files (contents by path from root, with slashes) in order
// of path, each only where its contents change, and says each one it
// wrote on say as "tool: wrote PATH".
func Write(root string, files map[string][]byte, tool string, say io.Writer) error {
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, files[rel]) {
			continue
		}
		if err := os.WriteFile(p, files[rel], 0o644); err != nil {
			return err
		}
		fmt.Fprintf(say, "%s: wrote %s\n", tool, rel)
	}
	return nil
}

// Main is a generator's main: it writes what generate makes from the
// module's root (Write), or says tool's error and exits 1.
func Main(tool string, generate func(root string) (map[string][]byte, error)) {
	err := func() error {
		root, err := ModuleRoot()
		if err != nil {
			return err
		}
		files, err := generate(root)
		if err != nil {
			return err
		}
		return Write(root, files, tool, os.Stdout)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, tool+":", err)
		os.Exit(1)
	}
}
