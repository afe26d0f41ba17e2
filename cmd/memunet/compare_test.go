package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareRuns: compare --runs plots existing runs' validation curves
// together and tabulates their last and best val mIoU; a directory without
// metrics.jsonl is named in the error, and --runs with --config is a usage
// error.
func TestCompareRuns(t *testing.T) {
	a, _ := trainTiny(t)
	b, _ := trainTiny(t, "--set", "train.schedule.kind=cosine")
	out := t.TempDir()
	stdout := runOK(t, "compare", "--runs", a+","+b, "--out", out)
	for _, want := range []string{"last val miou", filepath.Base(a), filepath.Base(b), "val-curves.png"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	f, err := os.Open(filepath.Join(out, "val-curves.png"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(f); err != nil {
		t.Errorf("val-curves.png: %v", err)
	}
	f.Close()
	var o, e bytes.Buffer
	if code := run([]string{"compare", "--runs", a + "," + t.TempDir(), "--out", out}, &o, &e); code != 1 || !strings.Contains(e.String(), "has no metrics.jsonl") {
		t.Errorf("a directory without a run: exit %d, %q", code, e.String())
	}
	e.Reset()
	if code := run([]string{"compare", "--config", "../../configs/quickstart.yaml", "--runs", a}, &o, &e); code != 2 {
		t.Errorf("--runs with --config: exit %d, %q", code, e.String())
	}
}
