package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/outdir"
)

// TestEvalAndExportLockTheirFolder: while another process holds the folder
// eval or export writes into, the command stops at once with the in-use
// line and writes nothing; once it is free the command writes its file and
// leaves no lock file beside it.
func TestEvalAndExportLockTheirFolder(t *testing.T) {
	runDir, _ := trainTiny(t)
	elsewhere := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		folder string // the folder the command writes into
		glob   string // its result
	}{
		{"eval", []string{"eval", "--checkpoint", runDir}, filepath.Join(runDir, "eval"), "val-step-*.json"},
		{"eval --out", []string{"eval", "--checkpoint", runDir, "--out", filepath.Join(elsewhere, "e.json")}, elsewhere, "e.json"},
		{"export", []string{"export", "--checkpoint", runDir}, runDir, "model-step-*.safetensors"},
		{"export --out", []string{"export", "--checkpoint", runDir, "--out", filepath.Join(elsewhere, "m.safetensors")}, elsewhere, "m.safetensors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, err := outdir.Acquire(tc.folder, "memunet train")
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			want := fmt.Sprintf("%s is in use by memunet train (pid %d on ", tc.folder, os.Getpid())
			if code != 1 || !strings.Contains(stderr.String(), want) {
				t.Errorf("while held: exit %d, %q; want 1 and %q", code, stderr.String(), want)
			}
			if m, _ := filepath.Glob(filepath.Join(tc.folder, tc.glob)); len(m) > 0 {
				t.Errorf("while held, it wrote %v", m)
			}
			hold.Release()
			stdout.Reset()
			stderr.Reset()
			if code := run(tc.args, &stdout, &stderr); code != 0 {
				t.Fatalf("once free: exit %d: %s", code, stderr.String())
			}
			if m, _ := filepath.Glob(filepath.Join(tc.folder, tc.glob)); len(m) != 1 {
				t.Errorf("once free, results %v", m)
			}
			if _, err := os.Lstat(filepath.Join(tc.folder, outdir.LockName)); !os.IsNotExist(err) && tc.folder != runDir {
				t.Errorf("a lock file stayed beside the result: %v", err)
			}
		})
	}
}

// TestExportReplacesAPlantedLink: a symlink where export writes is
// replaced by the file, and what it pointed at is left as it was.
func TestExportReplacesAPlantedLink(t *testing.T) {
	runDir, _ := trainTiny(t)
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.Symlink(target, out); err != nil {
		t.Fatal(err)
	}
	runOK(t, "export", "--checkpoint", runDir, "--out", out)
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("the link's target was written: %q", b)
	}
	if st, err := os.Lstat(out); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s is not a regular file now: %v", out, err)
	}
}
