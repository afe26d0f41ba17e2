package rundir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// Interrupt is a command's handling of SIGINT and SIGTERM: the first
// cancels the context it gives the work (memunet train finishes the step
// in progress and saves a checkpoint; predict and data synth stop between
// files and remove what they wrote; compare passes the signal on to its
// running child and waits for it); a second exits at once, whatever is
// being written. Checkpoints are written whole or not at all, so the
// newest complete one is then the previous one (or the one just renamed
// into place); metrics.jsonl may end in a partial line, which a resume
// drops.
type Interrupt struct {
	stderr io.Writer
	first  atomic.Int32 // the first signal's number (0: none yet)
	done   chan struct{}
	ch     chan os.Signal
}

// Signalled is the cause of a context an Interrupt cancelled: the signal.
type Signalled struct{ Signal os.Signal }

func (s Signalled) Error() string { return "stopped by " + SignalName(s.Signal) }

// SignalOf is the signal that cancelled ctx (an Interrupt's context, or
// one derived from it), if one did.
func SignalOf(ctx context.Context) (os.Signal, bool) {
	var s Signalled
	if errors.As(context.Cause(ctx), &s) {
		return s.Signal, true
	}
	return nil, false
}

// NotifyInterrupt is memunet train's handling: NotifySignals whose second
// signal leaves the newest complete checkpoint. SIGPIPE is ignored: a
// closed stdout (train | head -3) fails a write (EPIPE, which progress
// ignores) and the run goes on to save.
func NotifyInterrupt(stderr io.Writer) (context.Context, *Interrupt) {
	signal.Ignore(syscall.SIGPIPE)
	return NotifySignals(stderr, "stopping at once without saving; the newest complete checkpoint stays")
}

// NotifySignals starts handling the signals: the context it returns is
// cancelled by the first, with Signalled as its cause; a second prints
// "memunet: SIG again: " and again on stderr and exits the process at once
// with 128 + its number. Stop ends the handling.
func NotifySignals(stderr io.Writer, again string) (context.Context, *Interrupt) {
	ctx, cancel := context.WithCancelCause(context.Background())
	in := &Interrupt{stderr: stderr, done: make(chan struct{}), ch: make(chan os.Signal, 2)}
	signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer cancel(nil)
		select {
		case s := <-in.ch:
			in.first.Store(int32(signalNumber(s)))
			cancel(Signalled{s})
		case <-in.done:
			return
		}
		select {
		case s := <-in.ch:
			fmt.Fprintf(stderr, "memunet: %s again: %s\n", SignalName(s), again)
			os.Exit(128 + signalNumber(s))
		case <-in.done:
		}
	}()
	return ctx, in
}

// Status is 128 + the first signal's number: what a shell reports for a
// process that signal ended (130 for SIGINT, 143 for SIGTERM).
func (in *Interrupt) Status() int {
	n := int(in.first.Load())
	if n == 0 {
		n = int(syscall.SIGINT)
	}
	return 128 + n
}

// Stopped says on stderr, in one line, that the first signal stopped the
// command ("memunet: COMMAND: stopped by SIGTERM; then") and returns the
// exit status, where the work ended with the signal as its error (it
// wraps Signalled); else, a failure of its own or none, it says nothing
// and returns 0.
func (in *Interrupt) Stopped(err error, command, then string) int {
	n := in.first.Load()
	if n == 0 || !errors.As(err, new(Signalled)) {
		return 0
	}
	fmt.Fprintf(in.stderr, "memunet: %s: stopped by %s; %s\n", command, SignalName(syscall.Signal(n)), then)
	return in.Status()
}

// Stop ends the handling; the signals act as the process's defaults again.
func (in *Interrupt) Stop() {
	signal.Stop(in.ch)
	close(in.done)
}

// SignalName is SIGINT, SIGTERM, or what the signal calls itself.
func SignalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGINT)
}
