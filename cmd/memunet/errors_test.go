package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestOneErrorPrefix: a failed command prints one line with one "memunet:"
// prefix, the out-of-memory error too.
func TestOneErrorPrefix(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", t.TempDir() + "/run",
		"--set", "train.steps=2", "--set", "output.progress=none", "--set", "memory.capacity=64KiB"}, &out, &errb)
	oneLine(t, "train refused by the plan", code, errb.String())

	// The pool's own out-of-memory error, from predict's model.
	runDir, _ := trainTiny(t)
	errb.Reset()
	code = run([]string{"predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", t.TempDir(), "--capacity", "4KiB"}, &out, &errb)
	oneLine(t, "predict out of memory", code, errb.String())
	if !strings.Contains(errb.String(), "out of memory: tried to allocate") {
		t.Errorf("predict under 4 KiB: %q, want the pool's out-of-memory error", errb.String())
	}
}

func oneLine(t *testing.T, what string, code int, msg string) {
	t.Helper()
	if code != 1 || strings.Count(msg, "memunet:") != 1 || !strings.HasPrefix(msg, "memunet: ") || strings.Count(msg, "\n") != 1 {
		t.Errorf("%s: exit %d, stderr %q: want exit 1 and one line with one memunet: prefix", what, code, msg)
	}
}
