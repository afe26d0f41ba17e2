package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/memunet/memunet/internal/childtest"
)

// runInCgroup runs memunet (this test binary as main) with args as a
// member of the cgroup whose cgroup.procs file is procs, and returns its
// exit code, stdout, stderr and own peak resident memory.
func runInCgroup(t *testing.T, procs string, args ...string) (int, string, string, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	peak := measurePeakRSS(t, cmd)
	childtest.InCgroup(cmd, procs)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String(), peak()
}

// TestMemoryCgroupLimits: inside a memory cgroup of 1 GiB (v1 or v2,
// made by the test; skipped where none can be made), memunet sees the
// cgroup's limit, not the machine's memory: plan reports it with its
// source, a train that needs more is refused by name before its first
// step, and predict of an image too large to take whole within it (about
// 1.3 GiB whole) finishes by tiles under the limit, where it was
// OOM-killed when it planned against MemAvailable alone.
func TestMemoryCgroupLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	if runtime.GOOS != "linux" {
		t.Skip("memory cgroups are Linux's")
	}
	const limit = 1 << 30
	procs := childtest.MemoryCgroup(t, limit)

	code, stdout, stderr, _ := runInCgroup(t, procs, "plan", "--config", "../../configs/quickstart.yaml")
	if code != 0 || !strings.Contains(stdout, "host memory: this process may use") || !strings.Contains(stdout, "(cgroup memory.") ||
		!strings.Contains(stdout, " 1.00 GiB, ") || !strings.Contains(stdout, "the cgroup: "+filepath.Dir(procs)) {
		t.Errorf("plan in a 1 GiB cgroup: exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}

	run := t.TempDir()
	code, stdout, stderr, _ = runInCgroup(t, procs, "train", "--config", "../../configs/quickstart.yaml", "--out", run,
		"--set", "data.size=384", "--set", "data.count=64", "--set", "train.batch_size=16", "--set", "model.base=16")
	if code != 1 || !strings.Contains(stderr, "this run needs about") || !strings.Contains(stderr, "cgroup memory.") {
		t.Errorf("train needing about 2 GiB in a 1 GiB cgroup: exit %d, stderr: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(run, "checkpoints")); err == nil {
		t.Error("the refused train wrote checkpoints")
	}

	runDir, _ := trainTiny(t)
	in := t.TempDir()
	writeNoisePNG(t, filepath.Join(in, "big.png"), 3000, 3000)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr, rss := runInCgroup(t, procs, "predict", "--checkpoint", runDir, "--input", in, "--out", out)
	t.Logf("predict of 3000x3000 in a 1 GiB cgroup: exit %d, peak RSS %.1f MiB\n%s%s", code, float64(rss)/(1<<20), stdout, stderr)
	if code != 0 || !strings.Contains(stdout, "predicting it by tiles") {
		t.Fatalf("predict: exit %d, want 0 and a prediction by tiles: %s%s", code, stdout, stderr)
	}
	if rss > limit {
		t.Errorf("predict's peak RSS %d is above the cgroup's limit %d", rss, limit)
	}
}

// writeNoisePNG writes an h x w RGB PNG of blocks and noise: something to
// segment, and not a file that compresses to nothing.
func writeNoisePNG(t *testing.T, path string, h, w int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	seed := uint32(1)
	for y := range h {
		for x := range w {
			seed = seed*1664525 + 1013904223
			v := uint8(seed >> 26)
			if (x/200+y/300)%3 == 0 {
				v += 150
			}
			img.SetRGBA(x, y, color.RGBA{v, v / 2, 255 - v, 255})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(f, img); err != nil {
		t.Fatal(err)
	}
}
