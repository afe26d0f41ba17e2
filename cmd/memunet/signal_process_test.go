//go:build unix

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
)

// signalMidway stops p (SIGSTOP) once a file matches pattern while done
// (the file that says the work is finished) does not exist yet, sends it
// sigs, and lets it go on (SIGCONT): the signals land mid-way, whatever
// the machine's speed.
func signalMidway(t *testing.T, p *trainProcess, pattern, done string, sigs ...syscall.Signal) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Millisecond) {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 2 minutes; stderr %s", pattern, p.stderr.String())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer p.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(20 * time.Millisecond) // a rename under way when it stopped shows by now
	if _, err := os.Stat(done); err == nil {
		t.Fatalf("%s exists: the work ended before the signal; give it more to do", done)
	}
	for _, s := range sigs {
		if err := p.cmd.Process.Signal(s); err != nil {
			t.Fatal(err)
		}
	}
}

// predictInputs is a tiny run and a folder of count synthetic 32x32
// images to predict with it.
func predictInputs(t *testing.T, count int) (runDir, images string) {
	t.Helper()
	runDir, _ = trainTiny(t)
	set := filepath.Join(t.TempDir(), "set")
	runOK(t, "data", "synth", "--out", set, "--count", strconv.Itoa(count), "--size", "32", "--classes", "2")
	return runDir, filepath.Join(set, "images")
}

// names is what dir holds, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestPredictSignalled: SIGINT or SIGTERM mid-predict stops it between
// images, removes what it wrote (lock included) and exits 130 or 143 with
// one line saying so, so that the same command then runs; a second signal
// exits at once, and SIGKILL ends it anywhere: what either leaves is a
// prediction cut off, which the same command refuses (saying so, and
// what to paste) and with --force replaces, leaving only the new files.
func TestPredictSignalled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	runDir, images := predictInputs(t, 300)
	for _, tc := range []struct {
		sigs []syscall.Signal
		code int
		says string
	}{
		{[]syscall.Signal{syscall.SIGINT}, 130, "predict: stopped by SIGINT; removed what it had written into "},
		{[]syscall.Signal{syscall.SIGTERM}, 143, "predict: stopped by SIGTERM; removed what it had written into "},
		// Two of one kind pending while it is stopped would be one.
		{[]syscall.Signal{syscall.SIGINT, syscall.SIGTERM}, 143, "SIGTERM again: stopping at once"},
		{[]syscall.Signal{syscall.SIGKILL}, -1, ""},
	} {
		t.Run(strconv.Itoa(len(tc.sigs))+tc.sigs[0].String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"predict", "--checkpoint", runDir, "--input", images, "--out", out, "--overlay"}
			p := startMemunet(t, false, args...)
			signalMidway(t, p, filepath.Join(out, "*.png"), filepath.Join(out, "predict.json"), tc.sigs...)
			if code := p.wait(t); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, p.stderr.String())
			}
			if msg := p.stderr.String(); tc.says != "" && (!strings.Contains(msg, tc.says) || strings.Count(msg, "\n") != 1) {
				t.Errorf("stderr %q: want one line with %q", msg, tc.says)
			}
			if tc.code == -1 || len(tc.sigs) > 1 {
				replaceCutOff(t, out, args[:len(args)-1]) // stopped at once: what it wrote stays, as it says
				return
			}
			if left := names(t, out); len(left) != 0 {
				t.Errorf("%s holds %v after the signal", out, left)
			}
			again := startMemunet(t, false, args...)
			if code := again.wait(t); code != 0 {
				t.Fatalf("the same predict again: exit %d: %s", code, again.stderr.String())
			}
		})
	}
}

// replaceCutOff checks the folder a killed predict left: the predict args
// (into it, without --overlay) are refused as a cut-off prediction with
// the command to paste, which then replaces it; out then holds the new
// masks, legend.png and predict.json, and none of the killed predict's
// overlays.
func replaceCutOff(t *testing.T, out string, args []string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(out, outdir.JournalName)); err != nil {
		t.Fatalf("no journal after the kill: %v; %s holds %v", err, out, names(t, out))
	}
	var stdout, stderr strings.Builder
	const prog = "go run ./cmd/memunet " // what a test binary reads as
	same := prog + strings.Join(args, " ")
	if code := run(args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), out+" holds a prediction that was cut off (its predict was killed; ") ||
		!strings.Contains(stderr.String(), "replace it with "+same+" --force, or predict into a new folder with "+same+"-2\n") {
		t.Fatalf("into the cut-off prediction: exit %d: %s", code, stderr.String())
	}
	runOK(t, append(args, "--force")...)
	rep := readReport(t, out)
	listed := map[string]bool{"predict.json": true, "legend.png": true}
	for _, o := range rep.Outputs {
		listed[o.Mask] = true
	}
	left := names(t, out)
	for _, name := range left {
		if !listed[name] {
			t.Errorf("%s holds %s, not the new prediction's", out, name)
		}
	}
	if len(left) != 302 || rep.Images != 300 {
		t.Errorf("%s holds %d files (%d images predicted), want 300 masks, legend.png and predict.json", out, len(left), rep.Images)
	}
}

// TestDataSynthSignalled: SIGTERM mid-synth removes the partial set (and
// the folder it made) and exits 143 with one line, so that the same
// command then runs; a WriteFile leftover in masks/ does not stop it.
func TestDataSynthSignalled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	out := filepath.Join(t.TempDir(), "set")
	args := []string{"data", "synth", "--out", out, "--count", "3000", "--size", "32"}
	p := startMemunet(t, false, args...)
	signalMidway(t, p, filepath.Join(out, "masks", "*.png"), filepath.Join(out, "masks", "02999.png"), syscall.SIGTERM)
	if code := p.wait(t); code != 143 {
		t.Fatalf("exit %d, want 143; stderr %s", code, p.stderr.String())
	}
	if msg := p.stderr.String(); !strings.HasPrefix(msg, "memunet: data synth: stopped by SIGTERM; removed the samples") || strings.Count(msg, "\n") != 1 {
		t.Errorf("stderr %q", msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v), holding %v", out, err, names(t, filepath.Join(out, "images")))
	}
	if err := os.MkdirAll(filepath.Join(out, "masks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "masks", ".00007.png.tmp-99"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	runOK(t, append(args[:len(args)-4], "--count", "4", "--size", "16")...)
	if got := names(t, filepath.Join(out, "masks")); len(got) != 4 {
		t.Errorf("masks/ holds %v, want the 4 masks", got)
	}
}

// TestDataSynthKilled: SIGKILL mid-synth leaves its journal naming what
// it wrote; the same command is then refused, saying the set was cut off
// and what to paste, and with --force writes a set of its own: images/
// and masks/ hold only the new samples.
func TestDataSynthKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	out := filepath.Join(t.TempDir(), "set")
	args := []string{"data", "synth", "--out", out, "--count", "3000", "--size", "32"}
	p := startMemunet(t, false, args...)
	signalMidway(t, p, filepath.Join(out, "masks", "*.png"), filepath.Join(out, "masks", "02999.png"), syscall.SIGKILL)
	if code := p.wait(t); code != -1 {
		t.Fatalf("exit %d, want killed; stderr %s", code, p.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, outdir.JournalName)); err != nil {
		t.Fatalf("no journal after the kill: %v", err)
	}
	again := []string{"data", "synth", "--out", out, "--count", "4", "--size", "16"}
	var stdout, stderr strings.Builder
	if code := run(again, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), out+" holds a set cut off while it was written (its process was killed; ") ||
		!strings.Contains(stderr.String(), "replace it with go run ./cmd/memunet data synth --count 4 --out "+out+" --size 16 --force, or write into another directory\n") {
		t.Fatalf("into the cut-off set: exit %d: %s", code, stderr.String())
	}
	runOK(t, append(again, "--force")...)
	for _, sub := range []string{"images", "masks"} {
		if got := names(t, filepath.Join(out, sub)); !slices.Equal(got, []string{"00000.png", "00001.png", "00002.png", "00003.png"}) {
			t.Errorf("%s/ holds %d files (%v), want the 4 new samples", sub, len(got), got[:min(len(got), 6)])
		}
	}
	if got := names(t, out); !slices.Equal(got, []string{"images", "masks"}) {
		t.Errorf("%s holds %v", out, got)
	}
}

// TestCompareForwardsTheSignal: SIGTERM to compare reaches its running
// train child, which saves a checkpoint ("interrupt") and ends before
// compare exits 143 with one line; no child is left holding its run.
func TestCompareForwardsTheSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	dir := filepath.Join(t.TempDir(), "cmp")
	p := startMemunet(t, false, append([]string{"compare", "--config", "../../configs/quickstart.yaml", "--steps", "100000",
		"--out", dir, "--variants", "baseline,checkpoint"}, tinyArgs...)...)
	run := filepath.Join(dir, "baseline")
	signalMidway(t, p, filepath.Join(run, "metrics.jsonl"), filepath.Join(dir, "compare.json"), syscall.SIGTERM)
	if code := p.wait(t); code != 143 {
		t.Fatalf("exit %d, want 143; stderr %s", code, p.stderr.String())
	}
	if msg := p.stderr.String(); !strings.HasPrefix(msg, "memunet: compare: stopped by SIGTERM; 0 of 2 variants done") || strings.Count(msg, "\n") != 1 {
		t.Errorf("stderr %q", msg)
	}
	lock, err := outdir.Acquire(run, "test") // the child's lock went with it
	if err != nil {
		t.Fatalf("the child still holds its run: %v", err)
	}
	lock.Release()
	latest, err := checkpoint.Latest(filepath.Join(run, runfiles.Checkpoints))
	if err != nil || latest == "" {
		t.Fatalf("no checkpoint in %s: %v", run, err)
	}
	if ck, err := checkpoint.Open(latest); err != nil || ck.Manifest.Request.Reason != "interrupt" {
		t.Errorf("%s: %v, want the interrupt's checkpoint", latest, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint")); !os.IsNotExist(err) {
		t.Errorf("the second variant started (%v)", err)
	}
}

// TestTrainOutlivesAClosedStdout: train piped into a reader that goes
// away (train ... | head -3) finishes its steps and saves, rather than
// dying of SIGPIPE at its next line.
func TestTrainOutlivesAClosedStdout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	const steps = 40
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], append([]string{"train"}, processArgs(dir, steps)...)...)
	cmd.Env = append(os.Environ(), "MEMUNET_TEST_AS_MAIN=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(pipe)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "step 3/") {
	}
	cmd.Process.Signal(syscall.SIGSTOP) // the reader goes while steps remain
	time.Sleep(20 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		t.Fatal("the run ended before its reader went; give it more steps")
	}
	pipe.Close()
	cmd.Process.Signal(syscall.SIGCONT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("train with its stdout closed: %v; stderr %s", err, stderr.String())
	}
	if sum := ckSummary(t, dir); sum.Steps != steps || sum.Interrupted {
		t.Errorf("summary: %d steps (interrupted %v), want %d", sum.Steps, sum.Interrupted, steps)
	}
	checkOneRun(t, dir, steps)
}

// tinyPairs writes a folder set of count 16x16 pairs (RGB images, masks of
// values 0 and 1), every pair the same file: a scan that takes a while,
// made in a moment (hard links, where the file system has them).
func tinyPairs(t *testing.T, count int) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	mask := image.NewGray(img.Bounds())
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	for i := range mask.Pix {
		mask.Pix[i] = uint8(i % 2)
	}
	set := filepath.Join(t.TempDir(), "set")
	for sub, m := range map[string]image.Image{"images": img, "masks": mask} {
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(set, sub)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		first := filepath.Join(dir, "000000.png")
		if err := os.WriteFile(first, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < count; i++ {
			name := filepath.Join(dir, fmt.Sprintf("%06d.png", i))
			if os.Link(first, name) != nil {
				if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return set
}

// TestTrainSignalledInTheDataScan: SIGINT or SIGTERM while train scans a
// folder set, before its first step, exits 130 or 143 with one line that
// names the scan (not "context canceled", not exit 1), and leaves nothing:
// the run folder it made for the lock is gone.
func TestTrainSignalledInTheDataScan(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	set := tinyPairs(t, 20000)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			p := startTrain(t, false, append(processArgs(out, 4), "--set", "data.source=folder", "--set", "data.path="+set,
				"--set", "model.classes=2", "--set", "data.mask_values=[0,1]")...)
			// The run takes its folder's lock just before the scan; the
			// scan's end shows as its summary on stderr, and config.yaml
			// comes after planning: stopped, the process shows where it is.
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Millisecond) {
				if _, err := os.Stat(filepath.Join(out, outdir.LockName)); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no lock in %s in 2 minutes", out)
				}
			}
			if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // a file being written when it stopped shows by now
			if _, err := os.Stat(filepath.Join(out, "config.yaml")); err == nil {
				p.cmd.Process.Signal(syscall.SIGCONT)
				t.Fatal("config.yaml exists: the scan ended before the signal; give it more files")
			}
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			code := p.wait(t)
			want := fmt.Sprintf("memunet: train: stopped by %s during the data scan; nothing was written\n", rundir.SignalName(tc.sig))
			if code != tc.code || p.stderr.String() != want {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, p.stderr.String(), tc.code, want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s is still there (%v), holding %v", out, err, names(t, out))
			}
		})
	}
}
