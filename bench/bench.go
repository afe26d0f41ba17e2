// Package bench is memunet bench: training steps of each variant timed in
// this process (train.Bench), the CPU's FMA peak sampled between them, and
// repeats of the whole in fresh processes, so that a machine whose speed
// differs from process to process (thread placement, memory placement, a
// neighbour's load) shows it instead of hiding in one number.
//
// One peak sample is noise: under load it has read 2035% of a step's rate.
// Run takes one before each variant and one after the last; the table's %
// peak is of the best of them (load only slows a sample), never past what
// the arithmetic allows (Share), and a spread past Unsteady is reported as
// a machine whose speed changed while the bench ran. Repeat runs the
// command again in n child processes, one after another, and reads each
// one's Result (--json).
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/train"
)

// Options are a bench's settings.
type Options struct {
	Config config.Config
	// Variants are the variants' names (config, train.VariantNames).
	Variants []string
	// Steps are the timed optimizer steps of each (after one warm-up).
	Steps int
	// PeakSample is each FMA peak sample's time (0: DefaultPeakSample).
	PeakSample time.Duration
}

// DefaultPeakSample is one FMA peak sample's time.
const DefaultPeakSample = 150 * time.Millisecond

// Row is one variant's result.
type Row struct {
	Name string `json:"name"`
	train.BenchRow
	// Error says why the variant did not run ("": it ran).
	Error string `json:"error,omitempty"`
}

// Result is one process's bench.
type Result struct {
	// Device is the backend the variants ran on.
	Device string `json:"device"`
	// PeakSamples are the FMA peak's samples in GFLOP/s, in the order
	// taken (none off the CPU): Kernel's micro-kernel from L1 on Cores
	// cores (GOMAXPROCS).
	PeakSamples []float64 `json:"peak_gflops_samples,omitempty"`
	Kernel      string    `json:"peak_kernel,omitempty"`
	Cores       int       `json:"cores"`
	Rows        []Row     `json:"rows"`
}

// Peak is the samples' median, least and most (0s without samples).
func (r Result) Peak() (median, least, most float64) {
	if len(r.PeakSamples) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(r.PeakSamples))
	return s[len(s)/2], s[0], s[len(s)-1]
}

// WinogradGain is how many times fewer multiplications Winograd makes
// than the direct way at most: F(4x4,3x3)'s 4 (F(2x2,3x3)'s 2.25). A step
// whose 3x3 convolutions may take it can count up to that share of the
// peak in direct FLOPs.
const WinogradGain = 4.0

// Unsteady is the spread of the peak's samples (most over least) past
// which bench says the machine's speed changed while it ran.
const Unsteady = 1.10

// Share is gflops as a percentage of the peak's best sample, and whether
// the arithmetic allows it: at most 100, or 100·WinogradGain where the
// step may take Winograd's way. The best sample is the peak: another
// process, or the host's other guests, only ever slow a sample down. A
// share past the bound says the machine was slower while the peak was
// sampled than while the steps ran, so it is not a share of anything
// (ok false); without samples, 0 and false.
func (r Result) Share(gflops float64, winograd bool) (percent float64, ok bool) {
	_, _, best := r.Peak()
	if best <= 0 {
		return 0, false
	}
	bound := 100.0
	if winograd {
		bound *= WinogradGain
	}
	percent = 100 * gflops / best
	return percent, percent <= bound
}

// Steady reports whether the peak's samples agree within Unsteady, with
// their spread (most over least; 1 without samples).
func (r Result) Steady() (spread float64, ok bool) {
	_, least, most := r.Peak()
	if least <= 0 {
		return 1, true
	}
	return most / least, most/least <= Unsteady
}

// Run benches every variant of o on b, calling each with every row as it
// is done. On the CPU it samples the FMA peak before each variant and
// after the last. A variant that cannot be derived is a row with its
// error; a step that fails ends the bench with it.
func Run(o Options, b backend.Backend, each func(Row)) (Result, error) {
	if o.Steps < 1 {
		return Result{}, fmt.Errorf("bench: steps must be at least 1")
	}
	sample := o.PeakSample
	if sample <= 0 {
		sample = DefaultPeakSample
	}
	res := Result{Device: b.Name(), Cores: runtime.GOMAXPROCS(0)}
	if b.Name() == "cpu" {
		res.Kernel = kernels.GemmImplementation()
	}
	peak := func() {
		if b.Name() == "cpu" {
			res.PeakSamples = append(res.PeakSamples, kernels.MicroKernelPeak(sample))
		}
	}
	for _, name := range o.Variants {
		name = strings.TrimSpace(name)
		peak()
		row := Row{Name: name}
		vc, err := train.DeriveVariant(o.Config, name)
		if err != nil {
			row.Error = err.Error()
		} else if row.BenchRow, err = train.Bench(vc, b, o.Steps); err != nil {
			return res, fmt.Errorf("bench %s: %w", name, err)
		}
		res.Rows = append(res.Rows, row)
		if each != nil {
			each(row)
		}
	}
	peak()
	return res, nil
}

// Repeat runs the bench exe args describe (a memunet bench command line
// with --json and without --repeat) n times, each in a fresh process,
// one after another, and returns each one's Result; each is called as
// every process is done. ctx ends the running child (and the repeats).
func Repeat(ctx context.Context, exe string, args []string, n int, each func(i int, r Result)) ([]Result, error) {
	var out []Result
	for i := range n {
		cmd := exec.CommandContext(ctx, exe, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return out, context.Cause(ctx)
			}
			return out, fmt.Errorf("bench: process %d of %d: %v: %s", i+1, n, err, strings.TrimSpace(stderr.String()))
		}
		var r Result
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			return out, fmt.Errorf("bench: process %d of %d printed no result: %v", i+1, n, err)
		}
		out = append(out, r)
		if each != nil {
			each(i, r)
		}
	}
	return out, nil
}

// ChildArgs are the memunet command line a repeat runs, given bench's own
// arguments args (after "bench"): the same bench with --json, without
// --repeat and its value.
func ChildArgs(args []string) []string {
	out := []string{"bench", "--json"}
	for i := 0; i < len(args); i++ {
		flag, name := strings.HasPrefix(args[i], "-"), strings.TrimLeft(args[i], "-")
		switch {
		case flag && name == "repeat":
			i++ // and its value
		case flag && strings.HasPrefix(name, "repeat="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}
