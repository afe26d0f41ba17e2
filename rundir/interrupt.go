package rundir

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// Interrupt is a run's handling of SIGINT and SIGTERM (memunet train's):
// the first cancels the run's context (the step in progress finishes, a
// checkpoint is saved); a second exits at once, whatever is being written.
// Checkpoints are written whole or not at all, so the newest complete one
// is then the previous one (or the one just renamed into place);
// metrics.jsonl may end in a partial line, which a resume drops.
type Interrupt struct {
	first atomic.Int32 // the first signal's number (0: none yet)
	done  chan struct{}
	ch    chan os.Signal
}

// NotifyInterrupt starts handling the signals: the context it returns is
// cancelled by the first; a second says so on stderr and exits the process
// at once with 128 + its number. Stop ends the handling.
func NotifyInterrupt(stderr io.Writer) (context.Context, *Interrupt) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &Interrupt{done: make(chan struct{}), ch: make(chan os.Signal, 2)}
	signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer cancel()
		select {
		case s := <-in.ch:
			in.first.Store(int32(signalNumber(s)))
			cancel()
		case <-in.done:
			return
		}
		select {
		case s := <-in.ch:
			fmt.Fprintf(stderr, "memunet: %s again: stopping at once without saving; the newest complete checkpoint stays\n", s)
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

// Stop ends the handling; the signals act as the process's defaults again.
func (in *Interrupt) Stop() {
	signal.Stop(in.ch)
	close(in.done)
}

func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGINT)
}
