//go:build unix

package rundir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestInterruptCancels: the first signal cancels the run's context and
// sets the exit status a shell would report for it (143 for SIGTERM;
// before any, SIGINT's 130). The second signal's exit is
// TestSecondSignalStopsAtOnce's, in a process of its own.
func TestInterruptCancels(t *testing.T) {
	in := NotifyCommand(io.Discard, "train")
	defer in.Stop()
	ctx := in.CooperateTrain()
	if got := in.Status(); got != 130 {
		t.Errorf("status before a signal: %d, want 130", got)
	}
	if ctx.Err() != nil {
		t.Fatal("the context is done before a signal")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	if got := in.Status(); got != 143 {
		t.Errorf("status after SIGTERM: %d, want 143", got)
	}
	if s, ok := SignalOf(ctx); !ok || s != syscall.SIGTERM {
		t.Errorf("the context's signal: %v %v, want SIGTERM", s, ok)
	}
}

// TestSignalBeforeCooperatingExitsAtOnce: a signal while a command still
// reads, checks or plans (before it hands the signals to its work) ends
// the process at once with 128 + its number and one line saying so, not
// the silent death of a default handler. The child is this test binary.
func TestSignalBeforeCooperatingExitsAtOnce(t *testing.T) {
	if name := os.Getenv("MEMUNET_TEST_SIGNAL_AT_ONCE"); name != "" {
		in := NotifyCommand(os.Stderr, "memunet")
		in.AtOnce("train", "nothing was written")
		sig := map[string]syscall.Signal{"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM}[name]
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			os.Exit(3)
		}
		select {} // the handler exits; a deadlock here (exit 2) says it did not
	}
	for _, tc := range []struct {
		sig  string
		code int
	}{{"SIGINT", 130}, {"SIGTERM", 143}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalBeforeCooperatingExitsAtOnce$")
		cmd.Env = append(os.Environ(), "MEMUNET_TEST_SIGNAL_AT_ONCE="+tc.sig)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		want := "memunet: train: stopped by " + tc.sig + "; nothing was written\n"
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code || stderr.String() != want {
			t.Errorf("%s: %v, stderr %q; want exit %d and %q", tc.sig, err, stderr.String(), tc.code, want)
		}
	}
}

// TestStoppedNamesThePhase: a signal while the command cooperates
// cancels its context with the signal as the cause; Stopped names the
// phase During gave, and takes the context's own error for the signal's.
func TestStoppedNamesThePhase(t *testing.T) {
	var stderr bytes.Buffer
	in := NotifyCommand(&stderr, "train")
	defer in.Stop()
	ctx := in.Cooperate("")
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
	err := fmt.Errorf("data: reading set: %w", During(ctx, "the data scan"))
	if st := in.Stopped(err, "train", "nothing was written"); st != 130 ||
		stderr.String() != "memunet: train: stopped by SIGINT during the data scan; nothing was written\n" {
		t.Errorf("status %d, said %q", st, stderr.String())
	}
	stderr.Reset()
	if st := in.Stopped(context.Canceled, "eval", "no report was written"); st != 130 ||
		stderr.String() != "memunet: eval: stopped by SIGINT; no report was written\n" {
		t.Errorf("the context's own error: status %d, said %q", st, stderr.String())
	}
}
