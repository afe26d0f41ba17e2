package rundir

import (
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/schollz/progressbar/v3"
)

// progress shows training as a bar on a terminal, or as a plain line every
// output.log_every steps otherwise. Notes and validations are lines of their
// own in both modes.
type progress struct {
	w       io.Writer
	bar     *progressbar.ProgressBar
	width   int // the terminal's columns (bar mode)
	every   int
	total   int
	start   time.Time
	miou    float64 // the last validation's, -1 before one
	resumed int     // steps done before this process (a resumed run)
}

// minBarColumns is the narrowest terminal the bar is drawn on; below it
// progress is plain lines.
const minBarColumns = 40

func newProgress(out config.Output, opts Options, total int) *progress {
	p := &progress{w: opts.Progress, every: out.LogEvery, total: total, start: time.Now(), miou: -1}
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
	if p.width = opts.Columns; p.width == 0 {
		p.width = terminalColumns(p.w)
	}
	if mode == "bar" && p.width >= minBarColumns {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true), // the ETA
			progressbar.OptionSetWidth(barMinWidth),
			progressbar.OptionThrottle(cmp.Or(opts.barRefresh, 100*time.Millisecond)),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// The bar's line is the description (loss, val mIoU, pool peak, loss scale:
// as many as fit), then " 15% |bar| (120/800) [elapsed:ETA]": the percent
// and the bar's brackets (8), the count, and the two times (up to 15, as
// in [1h2m3s:10m20s]).
const (
	barMinWidth = 5
	barMaxWidth = 30
)

// describe is the bar's description for r: the fields that fit in the
// columns the bar leaves, and the bar's width.
func (p *progress) describe(r StepRecord) (desc string, barWidth int) {
	count := len(fmt.Sprintf(" (%d/%d) ", p.total, p.total))
	room := p.width - 1 - 8 - count - 15 - barMinWidth
	parts := []string{fmt.Sprintf("loss %.3f", r.Loss)}
	if p.miou >= 0 {
		parts = append(parts, fmt.Sprintf("miou %.3f", p.miou))
	}
	parts = append(parts, "peak "+compactBytes(r.PeakAllocatedBytes))
	if r.Precision == backend.Float16 || r.SkippedSteps > 0 {
		parts = append(parts, fmt.Sprintf("scale %g", r.LossScale))
	}
	for _, part := range parts {
		if len(desc)+len(part)+1 > room {
			break
		}
		desc += part + " "
	}
	return desc, min(barMaxWidth, barMinWidth+room-len(desc))
}

func (p *progress) step(r StepRecord) {
	if p.bar != nil {
		desc, width := p.describe(r)
		progressbar.OptionSetWidth(width)(p.bar) // before Describe, which draws
		p.bar.Describe(desc)
		_ = p.bar.Add(1)
		return
	}
	mem := fmt.Sprintf("loss %.4f  mem %s (peak %s, act %s)", r.Loss,
		memory.FormatBytes(r.AllocatedBytes), memory.FormatBytes(r.PeakAllocatedBytes),
		memory.FormatBytes(r.PeakByCategory[memory.Activations.String()]))
	if r.DeviceUsedBytes > 0 {
		mem += "  device " + memory.FormatBytes(r.DeviceUsedBytes)
	}
	if r.Precision == backend.Float16 || r.SkippedSteps > 0 {
		mem += fmt.Sprintf("  scale %g", r.LossScale)
		if r.SkippedSteps > 0 {
			mem += fmt.Sprintf(" (%d skipped)", r.SkippedSteps)
		}
	}
	if r.Step%p.every == 0 || r.Step == p.total {
		rate := float64(r.Step-p.resumed) / time.Since(p.start).Seconds()
		fmt.Fprintf(p.w, "step %d/%d  epoch %d  %s  %.2f step/s\n", r.Step, p.total, r.Epoch, mem, rate)
	}
}

func (p *progress) validation(v checkpoint.ValRecord) {
	p.miou = v.ValMIoU
	p.note(fmt.Sprintf("val  step %d  loss %.4f  pixel acc %.4f  miou %.4f  dice %.4f",
		v.Step, v.ValLoss, v.ValPixelAcc, v.ValMIoU, v.ValDice))
}

// compactBytes is n in binary units with one decimal: 7.5MiB.
func compactBytes(n int64) string {
	f, unit := float64(n), "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%.1f%s", f, unit)
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

// BarWriter is w where output.progress mode has a command draw its bar on
// w: bar, or auto where w is a terminal, and w at least minBarColumns
// wide; else nil (plain, none, or not a terminal: no bar). Predict and
// eval draw theirs on it (predict.Predictor.Progress).
func BarWriter(w io.Writer, mode string) io.Writer {
	if w == nil || mode == "none" || mode == "plain" || mode == "auto" && !IsTerminal(w) || terminalColumns(w) < minBarColumns {
		return nil
	}
	return w
}
