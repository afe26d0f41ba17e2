package rundir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// Interrupt is a command's handling of SIGINT and SIGTERM, from its start
// to its end. While the command reads, checks and plans, the first signal
// ends it at once: one line on stderr ("memunet: predict: stopped by
// SIGINT; nothing was written") and 128 + the signal's number, for no
// phase may die silently or with "context canceled". Once it hands the
// signals to work that stops cleanly (Cooperate), the first cancels the
// context that work watches (memunet train stops its data scan, leaving
// nothing, or finishes the step in progress and saves a checkpoint;
// predict, eval and data synth stop between files and remove what they
// wrote; compare passes the signal on to its running child and waits for
// it); a second exits at once, whatever is being written. Checkpoints are
// written whole or not at all, so the newest complete one is then the
// previous one (or the one just renamed into place); metrics.jsonl may end
// in a partial line, which a resume drops.
//
// A nil *Interrupt handles nothing: help's dry dispatch of a command.
type Interrupt struct {
	stderr io.Writer
	first  atomic.Int32 // the first signal's number (0: none yet)
	ctx    context.Context
	done   chan struct{}
	ch     chan os.Signal

	// mu orders Cooperate with a signal's exit at once: held from the
	// signal's arrival to os.Exit, so that no work begins writing while
	// the process ends on the promise that nothing was written.
	mu      sync.Mutex
	command string // named by the line a signal exits with at once
	atOnce  string // what that line adds (AtOnce)
	again   string // what a second signal says; "" until Cooperate
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

// During is the error of work that ctx's cancellation stopped in phase
// (e.g. "the data scan"), for Stopped to name; nil while ctx is not done.
func During(ctx context.Context, phase string) error {
	if ctx.Err() == nil {
		return nil
	}
	return &duringError{phase: phase, err: context.Cause(ctx)}
}

type duringError struct {
	phase string
	err   error
}

func (e *duringError) Error() string { return "during " + e.phase + ": " + e.err.Error() }
func (e *duringError) Unwrap() error { return e.err }

// NotifyCommand starts handling the signals for command (e.g. "train"),
// which exits at once on the first until it calls Cooperate. Stop ends the
// handling.
func NotifyCommand(stderr io.Writer, command string) *Interrupt {
	ctx, cancel := context.WithCancelCause(context.Background())
	in := &Interrupt{stderr: stderr, ctx: ctx, command: command, done: make(chan struct{}), ch: make(chan os.Signal, 2)}
	signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM)
	go in.watch(cancel)
	return in
}

// watch waits for the signals: the first exits at once or, once the
// command cooperates, cancels its context; a second exits at once.
func (in *Interrupt) watch(cancel context.CancelCauseFunc) {
	defer cancel(nil)
	var s os.Signal
	select {
	case s = <-in.ch:
	case <-in.done:
		return
	}
	in.first.Store(int32(signalNumber(s)))
	in.mu.Lock()
	if in.again == "" {
		line := fmt.Sprintf("memunet: %s: stopped by %s", in.command, SignalName(s))
		if in.atOnce != "" {
			line += "; " + in.atOnce
		}
		fmt.Fprintln(in.stderr, line)
		os.Exit(128 + signalNumber(s)) // mu stays held: nothing starts after this line
	}
	again := in.again
	in.mu.Unlock()
	cancel(Signalled{s})
	select {
	case s := <-in.ch:
		fmt.Fprintf(in.stderr, "memunet: %s again: %s\n", SignalName(s), again)
		os.Exit(128 + signalNumber(s))
	case <-in.done:
	}
}

// AtOnce names the command and what is true of its output if a signal
// ends it before it cooperates (e.g. "nothing was written"), for the line
// it exits with.
func (in *Interrupt) AtOnce(command, note string) {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.command, in.atOnce = command, note
}

// Cooperate hands the signals to work that stops cleanly: from now the
// first cancels the context it returns, with Signalled as its cause, and
// a second prints "memunet: SIG again: " and again on stderr and exits
// the process at once with 128 + its number.
func (in *Interrupt) Cooperate(again string) context.Context {
	if in == nil {
		return context.Background()
	}
	if again == "" {
		again = "stopping at once"
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.again = again
	return in.ctx
}

// CooperateTrain is Cooperate as memunet train stops: a second signal
// leaves the newest complete checkpoint. SIGPIPE is ignored: a closed
// stdout (train | head -3) fails a write (EPIPE, which progress ignores)
// and the run goes on to save.
func (in *Interrupt) CooperateTrain() context.Context {
	signal.Ignore(syscall.SIGPIPE)
	return in.Cooperate("stopping at once without saving; the newest complete checkpoint stays")
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
// command ("memunet: COMMAND: stopped by SIGTERM during PHASE; then", the
// phase where During named one) and returns the exit status, where the
// work ended with the signal as its error (it wraps Signalled, or is the
// cancelled context's own error); else, a failure of its own or none, it
// says nothing and returns 0.
func (in *Interrupt) Stopped(err error, command, then string) int {
	if in == nil {
		return 0
	}
	n := in.first.Load()
	if n == 0 || !errors.As(err, new(Signalled)) && !errors.Is(err, context.Canceled) {
		return 0
	}
	phase := ""
	if d := (*duringError)(nil); errors.As(err, &d) {
		phase = " during " + d.phase
	}
	fmt.Fprintf(in.stderr, "memunet: %s: stopped by %s%s; %s\n", command, SignalName(syscall.Signal(n)), phase, then)
	return in.Status()
}

// Stop ends the handling; the signals act as the process's defaults again.
func (in *Interrupt) Stop() {
	if in == nil {
		return
	}
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
