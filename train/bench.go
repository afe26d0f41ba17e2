package train

import (
	"slices"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/model"
)

// BenchRow is one variant's timed training steps (memunet bench).
type BenchRow struct {
	// Variant is the variant's micro-batch and accumulation, e.g. "4 x 1".
	Variant string `json:"variant"`
	// StepMS is the median step's time (where the device queues steps,
	// each the mean of its window: the steps from one read of the device
	// to the next); GFLOPs the whole step's achieved
	// rate at it (convolution FLOPs, 2*Cin*Cout*k*k*H*W per output, x3
	// for forward and backward: the direct way's count also where
	// Winograd multiplies up to 4x fewer, so it may pass the FMA peak).
	StepMS float64 `json:"step_ms"`
	GFLOPs float64 `json:"gflops"`
	// ConvGFLOPs is the convolutions' rate in their own time (conv
	// forward and backward columns): the kernels' share of the peak.
	ConvGFLOPs float64 `json:"conv_gflops"`
	// StepMSMin and StepMSMax are the fastest and slowest timed steps.
	StepMSMin float64 `json:"step_ms_min"`
	StepMSMax float64 `json:"step_ms_max"`
	// Winograd says the run may take Winograd's way (model.conv_algo not
	// direct).
	Winograd bool `json:"winograd,omitempty"`
	// KindMS, OptimizerMS and OtherMS are the mean time per optimizer step
	// in each layer kind (model.Kind's order), in the optimizer and in the
	// rest (data, gradient sums and bookkeeping).
	KindMS      [model.NumKinds]float64 `json:"kind_ms"`
	OptimizerMS float64                 `json:"optimizer_ms"`
	OtherMS     float64                 `json:"other_ms"`
	// Counted says the backend counts its device's work
	// (device.WorkCounter); then LaunchesPerStep, CopiesPerStep and
	// SyncsPerStep are the mean over the timed steps of the kernels
	// launched, the blocking copies to the host and the waits for all work
	// (backend.WorkCounts).
	Counted         bool    `json:"counted,omitempty"`
	LaunchesPerStep float64 `json:"launches_per_step,omitempty"`
	CopiesPerStep   float64 `json:"copies_per_step,omitempty"`
	SyncsPerStep    float64 `json:"syncs_per_step,omitempty"`
	// BlockingUploadsPerStep are the uploads a step made that waited for
	// the work before them (backend.WorkCounts).
	BlockingUploadsPerStep float64 `json:"blocking_uploads_per_step,omitempty"`
	// StepsPerRead is how many steps one read of the device answers:
	// output.log_every where the device queues steps (a training run reads
	// at its logged steps), 1 where each step reads its own.
	StepsPerRead int `json:"steps_per_read,omitempty"`
	// LoopWaitMS is, on the CPU (device.LoopWaiter), the mean time per
	// optimizer step the calling thread waited at the ends of the
	// parallel loops for the other cores: the loops' imbalance, and the
	// time the host took a core away while it left the caller's.
	LoopWaitMS float64 `json:"loop_wait_ms,omitempty"`
}

// Bench times steps optimizer steps of cfg on b after one warm-up step
// (which fills the pool's cache), with no capacity, fit or timeline.
func Bench(cfg config.Config, b backend.Backend, steps int) (BenchRow, error) {
	cfg.Memory.Capacity, cfg.Memory.Fit, cfg.Memory.Timeline = 0, "off", false
	tr, err := NewTrainer(cfg, Placement{Backend: b})
	if err != nil {
		return BenchRow{}, err
	}
	defer tr.Close()
	if _, err := tr.Step(); err != nil {
		return BenchRow{}, err
	}
	if _, err := tr.Settle(); err != nil {
		return BenchRow{}, err
	}
	tr.EnableProfile()
	tr.OptimizerTime = 0
	var times []float64
	var total time.Duration
	counter, counted := b.(device.WorkCounter)
	var before backend.WorkCounts
	if counted {
		before = counter.Counts()
	}
	waiter, waits := b.(device.LoopWaiter)
	var w0 time.Duration
	if waits {
		w0 = waiter.LoopWait()
	}
	// Read the device as a run does (rundir): every step where steps
	// do not queue, at each logged step where they do.
	every, window, t0 := max(cfg.Output.LogEvery, 1), 0, time.Now()
	for i := range steps {
		if _, err := tr.Step(); err != nil {
			return BenchRow{}, err
		}
		window++
		if n := tr.Pending(); n > 0 && n < tr.QueueLimit() && (i+1)%every != 0 && i < steps-1 {
			continue
		}
		if _, err := tr.Settle(); err != nil {
			return BenchRow{}, err
		}
		d := time.Since(t0)
		total += d
		for range window {
			times = append(times, float64(d.Microseconds())/1000/float64(window))
		}
		window, t0 = 0, time.Now()
	}
	slices.Sort(times)
	h, w := cfg.ImageSize()
	fwd, _ := tr.Net.FLOPs(h, w)
	// Winograd: only the CPU backend has it (CUDA computes every way directly).
	winograd := cfg.Model.ConvAlgo != backend.ConvDirect.String() && b.Name() == "cpu"
	row := BenchRow{Variant: cfg.Variant().Columns()[0], StepMS: times[len(times)/2], StepMSMin: times[0], StepMSMax: times[len(times)-1], Winograd: winograd,
		StepsPerRead: 1}
	if tr.QueueLimit() > 0 {
		row.StepsPerRead = min(every, tr.QueueLimit())
	}
	row.GFLOPs = 3 * fwd * float64(cfg.Variant().EffectiveBatch()) / (row.StepMS / 1000) / 1e9
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(steps) }
	accounted, totals := tr.OptimizerTime, tr.Profile.Totals()
	for k := range model.NumKinds {
		row.KindMS[k] = per(totals[k])
		accounted += totals[k]
	}
	row.OptimizerMS, row.OtherMS = per(tr.OptimizerTime), per(total-accounted)
	if conv := row.KindMS[model.KindConvForward] + row.KindMS[model.KindConvBackward]; conv > 0 {
		row.ConvGFLOPs = 3 * fwd * float64(cfg.Variant().EffectiveBatch()) / (conv / 1000) / 1e9
	}
	if waits {
		row.LoopWaitMS = per(waiter.LoopWait() - w0)
	}
	if counted {
		c, n := counter.Counts().Minus(before), float64(steps)
		row.Counted, row.LaunchesPerStep, row.CopiesPerStep, row.SyncsPerStep = true, float64(c.Launches)/n, float64(c.CopiesToHost)/n, float64(c.Syncs)/n
		row.BlockingUploadsPerStep = float64(c.BlockingUploads) / n
	}
	return row, nil
}
