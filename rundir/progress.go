package rundir

import (
	"fmt"
	"io"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/schollz/progressbar/v3"
)

// progress shows training as a bar on a terminal, or as a plain line every
// output.log_every steps otherwise.
type progress struct {
	w       io.Writer
	bar     *progressbar.ProgressBar
	every   int
	total   int
	start   time.Time
	lastVal string
	resumed int // steps done before this process (a resumed run)
}

func newProgress(out config.Output, opts Options, total int) *progress {
	p := &progress{w: opts.Progress, every: out.LogEvery, total: total, start: time.Now()}
	mode := out.Progress
	if mode == "auto" {
		mode = "plain"
		if opts.Terminal {
			mode = "bar"
		}
	}
	if p.w == nil || mode == "none" {
		p.w = io.Discard
		return p
	}
	if mode == "bar" {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("train"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("step"),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *progress) step(r StepRecord) {
	mem := fmt.Sprintf("loss %.4f  mem %s (peak %s, act %s)", r.Loss,
		memory.FormatBytes(r.AllocatedBytes), memory.FormatBytes(r.PeakAllocatedBytes),
		memory.FormatBytes(r.PeakByCategory[memory.Activations.String()]))
	if r.Precision == backend.Float16 || r.SkippedSteps > 0 {
		mem += fmt.Sprintf("  scale %g", r.LossScale)
		if r.SkippedSteps > 0 {
			mem += fmt.Sprintf(" (%d skipped)", r.SkippedSteps)
		}
	}
	if p.bar != nil {
		p.bar.Describe(mem + p.lastVal)
		_ = p.bar.Add(1)
		return
	}
	if r.Step%p.every == 0 || r.Step == p.total {
		rate := float64(r.Step-p.resumed) / time.Since(p.start).Seconds()
		fmt.Fprintf(p.w, "step %d/%d  epoch %d  %s  %.2f step/s\n", r.Step, p.total, r.Epoch, mem, rate)
	}
}

func (p *progress) validation(v ValRecord) {
	p.lastVal = fmt.Sprintf("  val miou %.3f", v.ValMIoU)
	if p.bar == nil {
		fmt.Fprintf(p.w, "val  step %d  loss %.4f  pixel acc %.4f  miou %.4f  dice %.4f\n",
			v.Step, v.ValLoss, v.ValPixelAcc, v.ValMIoU, v.ValDice)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// resumeAt starts the count at step (a resumed run).
func (p *progress) resumeAt(step int) {
	p.resumed, p.start = step, time.Now()
	if p.bar != nil {
		_ = p.bar.Set(step)
	}
}

// note prints a line of its own (a decision worth seeing), also under a bar.
func (p *progress) note(line string) {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintln(p.w, line)
}
