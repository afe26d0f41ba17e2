package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/runfiles"
)

// These tests run memunet as separate processes (this test binary acting
// as the command, see TestMain), as a user's two terminals or a scheduler
// would.

// trainProcess is a memunet train started as its own process.
type trainProcess struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	lines  chan string // stdout, line by line, when started with watch
	done   chan error
}

// startTrain starts "memunet train ARGS"; with watch, stdout comes line by
// line on lines as well.
func startTrain(t *testing.T, watch bool, args ...string) *trainProcess {
	t.Helper()
	return startMemunet(t, watch, append([]string{"train"}, args...)...)
}

// startMemunet starts "memunet ARGS" (ARGS begins with the command).
func startMemunet(t *testing.T, watch bool, args ...string) *trainProcess {
	t.Helper()
	p := &trainProcess{cmd: exec.Command(os.Args[0], args...), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), "MEMUNET_TEST_AS_MAIN=1")
	p.cmd.Stderr = &p.stderr
	var pipe io.ReadCloser
	if watch {
		var err error
		if pipe, err = p.cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
		p.lines = make(chan string, 1<<16)
	} else {
		p.cmd.Stdout = &p.stdout
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	go func() {
		if pipe != nil {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				p.stdout.WriteString(sc.Text() + "\n") // read only after done
				p.lines <- sc.Text()
			}
			close(p.lines)
		}
		p.done <- p.cmd.Wait()
	}()
	return p
}

// waitLine waits for a stdout line starting with prefix.
func (p *trainProcess) waitLine(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("the run ended before a line %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("no line %q in 2 minutes", prefix)
		}
	}
}

// wait is the process's exit status (-1: killed by a signal).
func (p *trainProcess) wait(t *testing.T) int {
	t.Helper()
	if p.lines != nil {
		for range p.lines { // drain, so that the process is not blocked writing
		}
	}
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		t.Fatal(err)
	case <-time.After(3 * time.Minute):
		t.Fatalf("no exit in 3 minutes; stderr %s", p.stderr.String())
	}
	return 0
}

// processArgs trains the tiny network of tinyArgs into dir for steps steps.
func processArgs(dir string, steps int, more ...string) []string {
	args := append([]string{"--config", "../../configs/quickstart.yaml", "--out", dir}, tinyArgs...)
	args = append(args, "--set", fmt.Sprintf("train.steps=%d", steps), "--set", "train.val_every=10",
		"--set", "train.checkpoint_every=10", "--set", "output.progress=plain", "--set", "output.log_every=1")
	return append(args, more...)
}

// checkOneRun holds dir to one run's files: metrics.jsonl parses line by
// line with each step once, in order, up to steps, and the checkpoints
// are of distinct steps (no step-N-2 beside step-N), each verifying.
func checkOneRun(t *testing.T, dir string, steps int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	next := 1
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var r struct {
			Type string `json:"type"`
			Step int    `json:"step"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("metrics.jsonl line %d does not parse: %v: %q", i+1, err, line)
		}
		if r.Type == "step" {
			if r.Step != next {
				t.Fatalf("metrics.jsonl line %d: step %d, want %d", i+1, r.Step, next)
			}
			next++
		}
	}
	if next-1 != steps {
		t.Errorf("metrics.jsonl has %d steps, want %d", next-1, steps)
	}
	list, err := checkpoint.List(filepath.Join(dir, runfiles.Checkpoints))
	if err != nil || len(list) == 0 {
		t.Fatalf("checkpoints: %v, %v", list, err)
	}
	for _, e := range list {
		if e.Seq != 1 {
			t.Errorf("%s: a second checkpoint of step %d: two runs wrote here", e.Name, e.Step)
		}
		if _, err := checkpoint.Open(e.Path); err != nil {
			t.Error(err)
		}
	}
}

// raceTwo starts two trains with the same arguments at once and checks
// that exactly one trains and the other is refused, naming the first's pid.
func raceTwo(t *testing.T, args []string) (winner *trainProcess) {
	t.Helper()
	return raceTwoOf(t, append([]string{"train"}, args...))
}

// raceTwoOf is raceTwo of any command (args begins with it).
func raceTwoOf(t *testing.T, args []string) (winner *trainProcess) {
	t.Helper()
	a, b := startMemunet(t, false, args...), startMemunet(t, false, args...)
	codeA, codeB := a.wait(t), b.wait(t)
	if (codeA == 0) == (codeB == 0) {
		t.Fatalf("exit statuses %d and %d, want one 0 and one refusal\nA: %s\nB: %s", codeA, codeB, a.stderr.String(), b.stderr.String())
	}
	winner, loser := a, b
	if codeB == 0 {
		winner, loser = b, a
	}
	want := fmt.Sprintf("is in use by memunet %s (pid %d on ", args[0], winner.cmd.Process.Pid)
	if msg := loser.stderr.String(); !strings.HasPrefix(msg, "memunet: ") || !strings.Contains(msg, want) || strings.Count(msg, "\n") != 1 {
		t.Errorf("the refused run said %q, want one line with %q", msg, want)
	}
	if loser.stdout.Len() > 0 {
		t.Errorf("the refused run printed %q", loser.stdout.String())
	}
	return winner
}

// TestTwoTrainsOneFolder: two fresh trains on one folder at the same
// moment: one trains, the other is refused at once by the lock (not after
// the emptiness check both could pass), and the folder holds one run.
func TestTwoTrainsOneFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	dir := filepath.Join(t.TempDir(), "same")
	raceTwo(t, processArgs(dir, 60))
	checkOneRun(t, dir, 60)
}

// TestTwoResumesOneRun: the same for two --resume auto of one run.
func TestTwoResumesOneRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	dir := t.TempDir()
	if code := startTrain(t, false, processArgs(dir, 10)...).wait(t); code != 0 {
		t.Fatalf("the first run: exit %d", code)
	}
	raceTwo(t, append(processArgs(dir, 60), "--resume", "auto"))
	checkOneRun(t, dir, 60)
}

// TestKilledTrainLeavesNoLock: a train SIGKILLed while it holds its folder
// leaves nothing to clean up: --resume auto starts at once.
func TestKilledTrainLeavesNoLock(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	dir := t.TempDir()
	p := startTrain(t, true, processArgs(dir, 100000, "--set", "train.checkpoint_every=2")...)
	p.waitLine(t, "checkpoint: ")
	p.cmd.Process.Signal(syscall.SIGKILL)
	if code := p.wait(t); code != -1 {
		t.Fatalf("exit %d after SIGKILL", code)
	}
	latest, err := checkpoint.Latest(filepath.Join(dir, runfiles.Checkpoints))
	if err != nil || latest == "" {
		t.Fatalf("no checkpoint before the kill: %v", err)
	}
	ck, err := checkpoint.Open(latest)
	if err != nil {
		t.Fatal(err)
	}
	again := startTrain(t, false, append(processArgs(dir, ck.Manifest.Step+2), "--resume", "auto")...)
	if code := again.wait(t); code != 0 {
		t.Fatalf("--resume auto after the kill: exit %d: %s", code, again.stderr.String())
	}
}

// TestInterruptExitStatus: SIGINT and SIGTERM mid-run save a checkpoint
// and exit 130 and 143; --resume auto then ends where an uninterrupted run
// ends, bit for bit (weights and optimizer state).
func TestInterruptExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	const steps = 40
	straight := t.TempDir()
	if code := startTrain(t, false, processArgs(straight, steps)...).wait(t); code != 0 {
		t.Fatalf("the uninterrupted run: exit %d", code)
	}
	want := finalTensors(t, straight)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := startTrain(t, true, processArgs(dir, steps)...)
			p.waitLine(t, "step 3/")
			p.cmd.Process.Signal(tc.sig)
			if code := p.wait(t); code != tc.code {
				t.Fatalf("exit %d after %s, want %d; stderr %s", code, tc.sig, tc.code, p.stderr.String())
			}
			out := p.stdout.String()
			if !strings.Contains(out, "interrupted after step") || !strings.Contains(out, "done: ") {
				t.Errorf("output:\n%s", out)
			}

			latest, err := checkpoint.Latest(filepath.Join(dir, runfiles.Checkpoints))
			if err != nil {
				t.Fatal(err)
			}
			ck, err := checkpoint.Open(latest)
			if err != nil {
				t.Fatal(err)
			}
			if ck.Manifest.Request.Reason != "interrupt" || ck.Manifest.Step < 3 || ck.Manifest.Step >= steps {
				t.Fatalf("checkpoint %s: %+v at step %d", latest, ck.Manifest.Request, ck.Manifest.Step)
			}
			// The interrupt's validation is announced before it runs (a
			// large split takes a while), unless the step had just validated.
			note := fmt.Sprintf("interrupted: validating step %d before stopping", ck.Manifest.Step)
			if ck.Manifest.Step%10 != 0 && !strings.Contains(out, note) {
				t.Errorf("no %q in:\n%s", note, out)
			}
			resumed := startTrain(t, false, "--resume", "auto", "--out", dir)
			if code := resumed.wait(t); code != 0 {
				t.Fatalf("--resume auto: exit %d: %s", code, resumed.stderr.String())
			}
			got := finalTensors(t, dir)
			for name, b := range want {
				if !bytes.Equal(got[name], b) {
					t.Errorf("%s after the resume differs from the uninterrupted run's", name)
				}
			}
		})
	}
}

// TestSecondSignalStopsAtOnce: a second signal while the first one's
// checkpoint is being written ends the run at once with the same status,
// leaving the previous checkpoint the newest complete one.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	dir := t.TempDir()
	if code := startTrain(t, false, processArgs(dir, 4)...).wait(t); code != 0 {
		t.Fatalf("the first run: exit %d", code)
	}
	previous, err := checkpoint.Latest(filepath.Join(dir, runfiles.Checkpoints))
	if err != nil || previous == "" {
		t.Fatalf("no checkpoint: %v", err)
	}
	t.Setenv("MEMUNET_TEST_SLOW_SAVE", "1") // the interrupt's save, the only one, hangs
	p := startTrain(t, true, append(processArgs(dir, 100000, "--set", "train.checkpoint_every=0", "--set", "train.keep_best=false"),
		"--resume", "auto")...)
	p.waitLine(t, "step 6/")
	p.cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(dir, runfiles.Checkpoints, checkpoint.TempPrefix+"*")); len(m) > 0 {
			break // the save has begun
		}
		if time.Now().After(deadline) {
			t.Fatal("the interrupt's save did not begin")
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 143 {
		t.Fatalf("exit %d, want 143; stderr %s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "again: stopping at once without saving") {
		t.Errorf("stderr %q does not say it stopped at once", p.stderr.String())
	}
	if latest, err := checkpoint.Latest(filepath.Join(dir, runfiles.Checkpoints)); err != nil || latest != previous {
		t.Errorf("the newest complete checkpoint is %q (%v), want the previous %s", latest, err, previous)
	}
	if _, err := checkpoint.Open(previous); err != nil {
		t.Error(err)
	}
}

// finalTensors is the run's newest checkpoint's tensor files.
func finalTensors(t *testing.T, run string) map[string][]byte {
	t.Helper()
	latest, err := checkpoint.Latest(filepath.Join(run, runfiles.Checkpoints))
	if err != nil || latest == "" {
		t.Fatalf("no checkpoint in %s: %v", run, err)
	}
	out := map[string][]byte{}
	for _, name := range []string{runfiles.Model, runfiles.Optimizer} {
		b, err := os.ReadFile(filepath.Join(latest, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}
