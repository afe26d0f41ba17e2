// Command opgen writes what backend/ops.go, the table of the Backend's
// operations, decides: the Method enum, the noop backend's methods, each
// backend's Supports and composed methods, the CUDA backend's Kernel enum
// and generated methods, the CUDA emulator's dispatch, backendtest's
// registration and the operation lists of docs/design.md and backend/doc.go.
// It checks the table against the kernels (backend/cuda/kernels/*.cu), the
// backends' own methods and backendtest's cases, and stops naming what is
// missing.
//
// go generate ./backend runs it (ops.go's //go:generate line); it writes
// only files whose contents change. It needs no CUDA toolkit: the fatbins
// are go generate -tags cudagen ./backend/cuda's.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "opgen:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	files, err := Generate(root)
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		full := filepath.Join(root, filepath.FromSlash(p))
		if old, err := os.ReadFile(full); err == nil && bytes.Equal(old, files[p]) {
			continue
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return err
		}
		fmt.Println("opgen: wrote", p)
	}
	return nil
}

// moduleRoot is the nearest directory at or above the working one that
// holds go.mod.
func moduleRoot() (string, error) {
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
