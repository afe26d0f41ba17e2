package rundir

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestStoppedOnlyByTheSignal: after a signal, a command that ended with
// the signal as its error is reported stopped (exit 128+n, one line); one
// that failed for a reason of its own keeps that error (status 0 here).
func TestStoppedOnlyByTheSignal(t *testing.T) {
	var stderr bytes.Buffer
	in := &Interrupt{stderr: &stderr}
	in.first.Store(int32(syscall.SIGTERM))
	if st := in.Stopped(errors.New("writing x.png: no space left on device"), "predict", "removed it"); st != 0 || stderr.Len() != 0 {
		t.Errorf("a failure of its own: status %d, said %q", st, stderr.String())
	}
	if st := in.Stopped(fmt.Errorf("image 3: %w", Signalled{syscall.SIGTERM}), "predict", "removed it"); st != 143 ||
		stderr.String() != "memunet: predict: stopped by SIGTERM; removed it\n" {
		t.Errorf("stopped by the signal: status %d, said %q", st, stderr.String())
	}
	if st := (&Interrupt{stderr: &stderr}).Stopped(Signalled{syscall.SIGINT}, "predict", ""); st != 0 {
		t.Errorf("no signal came, yet status %d", st)
	}
}
