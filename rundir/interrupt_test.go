//go:build unix

package rundir

import (
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestInterruptCancels: the first signal cancels the run's context and
// sets the exit status a shell would report for it (143 for SIGTERM;
// before any, SIGINT's 130). The second signal's exit is
// TestSecondSignalStopsAtOnce's, in a process of its own.
func TestInterruptCancels(t *testing.T) {
	ctx, in := NotifyInterrupt(io.Discard)
	defer in.Stop()
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
