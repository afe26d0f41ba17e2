package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/memunet/memunet/internal/childtest"
	"github.com/memunet/memunet/outdir"
)

// headerOnlyPNG is a PNG that declares w x h RGB pixels and holds none: a
// decompression bomb's header.
func headerOnlyPNG(w, h int) []byte {
	chunk := func(kind string, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		b = append(b, kind...)
		b = append(b, body...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(kind), body...)))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	b := append([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr)...)
	return append(b, chunk("IEND", nil)...)
}

// runMeasured runs memunet (this test binary as main) with args and returns
// its exit code, stderr and peak resident memory in bytes.
func runMeasured(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	peak := measurePeakRSS(t, cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), peak()
}

// measurePeakRSS sets cmd to run this test binary as memunet and returns
// what reads the child's own peak resident memory in bytes once it has
// exited: its VmHWM where /proc has it (the child writes it as it exits),
// else its rusage. On Linux a child's rusage counts the parent's peak too
// (exec records the peak of the address space it leaves, and os/exec's
// child starts in the parent's), so a test process grown by earlier tests
// would seem to hand its peak to every child.
func measurePeakRSS(t *testing.T, cmd *exec.Cmd) func() int64 {
	t.Helper()
	file := filepath.Join(t.TempDir(), "hwm")
	cmd.Env = append(os.Environ(), "MEMUNET_TEST_AS_MAIN=1", "MEMUNET_TEST_HWM_FILE="+file)
	return func() int64 {
		if b, err := os.ReadFile(file); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
				return n
			}
		}
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			t.Skip("no rusage here")
		}
		if runtime.GOOS == "darwin" {
			return int64(ru.Maxrss)
		}
		return int64(ru.Maxrss) << 10 // kilobytes on Linux
	}
}

// writeOwnPeakRSS writes this process's own peak resident memory in
// bytes to path; nothing where the system does not report it.
func writeOwnPeakRSS(path string) {
	if n, ok := childtest.OwnPeakRSS(); ok {
		os.WriteFile(path, []byte(strconv.FormatInt(n, 10)), 0o644)
	}
}

// TestPixelBombRefusedInBoundedMemory: a PNG whose header declares
// 40000x40000 pixels (and holds none) is refused by predict, as an input
// file, and by eval, in the dataset it scores, naming the file, with the
// process's peak RSS under 100 MB: the pixel limit comes before any
// buffer of the image's size (predict once planned such a batch with a
// host buffer of N*H*W bytes).
func TestPixelBombRefusedInBoundedMemory(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("peak RSS from rusage is read on Linux and macOS")
	}
	runDir, _ := trainTiny(t)
	in := t.TempDir()
	bomb := filepath.Join(in, "bomb.png")
	if err := os.WriteFile(bomb, headerOnlyPNG(40000, 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(t.TempDir(), "set")
	runOK(t, "data", "synth", "--out", ds, "--count", "4", "--size", "16")
	for _, sub := range []string{"images", "masks"} {
		if err := os.WriteFile(filepath.Join(ds, sub, "00002.png"), headerOnlyPNG(40000, 40000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const limit = 100 << 20
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"predict", []string{"predict", "--checkpoint", runDir, "--input", in, "--out", filepath.Join(t.TempDir(), "out")}, "bomb.png: 8-bit RGB PNG of 40000x40000"},
		{"eval", []string{"eval", "--checkpoint", runDir, "--set", "data.source=folder", "--set", "data.path=" + ds, "--out", filepath.Join(t.TempDir(), "e.json")}, "00002.png"},
	} {
		code, stderr, rss := runMeasured(t, tc.args...)
		t.Logf("%s: exit %d, peak RSS %.1f MB: %s", tc.name, code, float64(rss)/1e6, strings.TrimSpace(stderr))
		if code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "40000x40000") {
			t.Errorf("%s: exit %d, stderr %q; want %q", tc.name, code, stderr, tc.want)
		}
		if rss > limit {
			t.Errorf("%s: peak RSS %d bytes, above %d", tc.name, rss, limit)
		}
	}
}

// TestPredictOutInUse: a second predict into an --out another predict
// holds is refused at once with the line naming the holder; the holder's
// folder is left alone.
func TestPredictOutInUse(t *testing.T) {
	runDir, _ := trainTiny(t)
	out := t.TempDir()
	held, err := outdir.Acquire(out, "memunet predict")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", out}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), out+" is in use by memunet predict (pid ") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	held.Release()
	runOK(t, "predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", out)
}

// TestEvalPlansItsMemory: eval plans a batch before reading the data and
// refuses one that cannot fit --capacity, naming the batch or the size
// that would; the quickstart model at 2048x2048 does not fit 16 MiB.
func TestEvalPlansItsMemory(t *testing.T) {
	runDir, _ := trainTiny(t)
	var stdout, stderr bytes.Buffer
	args := []string{"eval", "--checkpoint", runDir, "--set", "data.size=2048", "--capacity", "16MiB", "--out", filepath.Join(t.TempDir(), "e.json")}
	code := run(args, &stdout, &stderr)
	msg := stderr.String()
	for _, want := range []string{"eval: --split val: batches of 4 images of 2048x2048 (height x width) need a pool peak of", "above its capacity 16.00 MiB", "one of ", "data.resize=["} {
		if !strings.Contains(msg, want) {
			t.Errorf("exit %d; stderr lacks %q: %s", code, want, msg)
		}
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	stderr.Reset()
	// 640 MiB holds one 2048x2048 image, not four.
	args[len(args)-3] = "640MiB"
	if code := run(args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--batch 1 fits (it needs a pool peak of") {
		t.Errorf("at 640 MiB: exit %d: %s", code, stderr.String())
	}
}
