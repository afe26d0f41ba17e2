package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportNeverDestroysItsInput: --out naming the checkpoint being read,
// a file in it, anything under the run's checkpoints/ or one of the run's
// own files is refused (usage error, nothing written); without --out the
// file goes into the run directory.
func TestExportNeverDestroysItsInput(t *testing.T) {
	runDir, sum := trainTiny(t)
	ck := sum.LastCheckpoint
	model := filepath.Join(ck, "model.safetensors")
	before, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{
		model,
		ck,
		filepath.Join(ck, "new.safetensors"),
		filepath.Join(runDir, "checkpoints", "x.safetensors"),
		filepath.Join(runDir, "metrics.jsonl"),
		filepath.Join(runDir, "config.yaml"),
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"export", "--checkpoint", runDir, "--out", out}, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "--out "+out) {
			t.Errorf("export --out %s: exit %d, %q: want a usage error naming it", out, code, stderr.String())
		}
	}
	if after, _ := os.ReadFile(model); !bytes.Equal(after, before) {
		t.Fatalf("an export changed the checkpoint's model.safetensors")
	}
	if _, err := os.Stat(filepath.Join(ck, "new.safetensors")); err == nil {
		t.Errorf("an export wrote into the checkpoint")
	}

	stdout := runOK(t, "export", "--checkpoint", runDir, "--dtype", "bf16")
	want := filepath.Join(runDir, "model-step-00000004-bf16.safetensors")
	if _, err := os.Stat(want); err != nil || !strings.Contains(stdout, want) {
		t.Errorf("export without --out: %v, stdout %q; want %s", err, stdout, want)
	}
}
