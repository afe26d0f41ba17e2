package rundir

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/runfiles"
)

// crashEnv makes the test binary a training process for TestCheckpointCrash:
// "DIR" trains until killed from outside; "DIR,K" kills itself with SIGKILL
// at the K-th point of a checkpoint write or removal where a crash would
// leave a different state on disk.
const crashEnv = "MEMUNET_CHECKPOINT_CRASH_CHILD"

func crashConfig() config.Config {
	c := resumeConfig("fp32")
	c.Train.Steps, c.Train.ValEvery = 1_000_000, 3
	c.Train.CheckpointEvery, c.Train.KeepLast, c.Train.KeepBest = 1, 2, true
	c.Output.Progress, c.Output.LogEvery = "plain", 1_000_000
	return c
}

// TestCrashChild is the child process of TestCheckpointCrash; alone it skips.
func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("the training process of TestCheckpointCrash")
	}
	dir, k, _ := strings.Cut(spec, ",")
	if kill, _ := strconv.Atoi(k); kill > 0 {
		n := 0
		checkpoint.FaultHook = func(string) {
			if n++; n == kill {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // never returns
			}
		}
	}
	fmt.Println("ready")
	_, err := Run(context.Background(), crashConfig(), Options{OutDir: dir, Resume: "auto", Progress: os.Stdout})
	t.Fatalf("training ended: %v", err)
}

var savedRE = regexp.MustCompile(`^checkpoint: .* \(step (\d+),`)

// TestCheckpointCrash kills a training process with SIGKILL at random
// moments while it writes a checkpoint after every step, 60 times in the
// same run directory, each time resuming from the newest checkpoint. After
// every kill: every directory under a checkpoint's name verifies completely
// (no partial checkpoint is ever taken for complete), the newest one is at
// least as new as the last one the process reported written, and it loads
// into a trainer. Half the kills come from the process itself at a random
// one of the points where the disk state changes (between two writes of a
// file, before an fsync, before and after the rename, during the removal
// of an old checkpoint), half from outside after a random delay.
func TestCheckpointCrash(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("inside the child")
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	run := t.TempDir()
	ckDir := filepath.Join(run, runfiles.Checkpoints)
	const trials = 60
	confirmed, partial := 0, 0
	for trial := range trials {
		spec := run
		external := trial%2 == 1
		if !external {
			spec += fmt.Sprintf(",%d", 1+rng.IntN(120))
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+spec)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan struct{})
		lines := make(chan int, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(ready)
				}
				if m := savedRE.FindStringSubmatch(sc.Text()); m != nil {
					s, _ := strconv.Atoi(m[1])
					lines <- s
				}
			}
			close(lines)
		}()
		if external {
			select {
			case <-ready:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("child never started")
			}
			time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
			cmd.Process.Signal(syscall.SIGKILL)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("trial %d: child did not die", trial)
		}
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("trial %d (%s): child ended without SIGKILL: %v", trial, spec, err)
		}
		for s := range lines {
			confirmed = max(confirmed, s)
		}

		des, _ := os.ReadDir(ckDir)
		for _, de := range des {
			if strings.HasPrefix(de.Name(), checkpoint.TempPrefix) || strings.HasPrefix(de.Name(), checkpoint.TrashPrefix) {
				partial++
				break
			}
		}
		list, err := checkpoint.List(ckDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list {
			if _, err := checkpoint.Open(e.Path); err != nil {
				t.Fatalf("trial %d (%s): a directory under a checkpoint's name does not verify: %v", trial, spec, err)
			}
		}
		latest, err := checkpoint.Latest(ckDir)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if latest == "" {
			if confirmed > 0 {
				t.Fatalf("trial %d: no checkpoint, but step %d was reported saved", trial, confirmed)
			}
			continue
		}
		ck, err := checkpoint.Open(latest)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Manifest.Step < confirmed {
			t.Fatalf("trial %d: newest checkpoint is step %d, step %d was reported saved", trial, ck.Manifest.Step, confirmed)
		}
		if trial%10 == 9 { // restoring is also what the next child does; check it here now and then
			tr := testTrainer(t, crashConfig())
			if err := Restore(tr, ck, false); err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
		}
	}
	t.Logf("%d trials: newest checkpoint step %d; after %d kills a partial (temporary or trash) directory was left", trials, confirmed, partial)
	if confirmed < 5 {
		t.Errorf("only %d steps checkpointed in %d trials: the kills came too early to test writes", confirmed, trials)
	}
	if partial < trials/8 {
		t.Errorf("only %d of %d kills interrupted a checkpoint write", partial, trials)
	}
}
