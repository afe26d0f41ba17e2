package train

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// VariantNames lists the memory-saving variants in the order plan and
// compare show them. "config" is the configuration as given.
func VariantNames() []string {
	return []string{"baseline", "checkpoint", "fp16", "bf16", "accum4", "all"}
}

// DeriveVariant turns cfg into the named variant on the same model and data
// and the same effective batch (batch_size x accumulate = E):
//
//	config      cfg unchanged
//	baseline    fp32, no recompute, batch E, accumulate 1
//	checkpoint  baseline with every level recomputed
//	fp16, bf16  baseline in that precision
//	accum4      baseline as 4 micro-batches of E/4 (E must be divisible by 4)
//	all         checkpoint + fp16 + accum4
//	offload     checkpoint with the blocks' inputs in host memory
//	            (memory.offload: checkpoints; not in VariantNames: asked
//	            for by name, as plan --variants and compare --variants do)
func DeriveVariant(cfg config.Config, name string) (config.Config, error) {
	if name == "config" {
		return cfg.WithVariant(cfg.Variant()), nil
	}
	v := cfg.Variant()
	eff := v.EffectiveBatch()
	v.Checkpoint, v.Precision, v.MicroBatch, v.Accumulate, v.Offload = config.Checkpoint{}, backend.Float32, eff, 1, false
	accum4 := func() error {
		if eff%4 != 0 {
			return fmt.Errorf("variant %s needs an effective batch (train.batch_size x train.accumulate = %d) divisible by 4", name, eff)
		}
		v.MicroBatch, v.Accumulate = eff/4, 4
		return nil
	}
	switch name {
	case "baseline":
	case "checkpoint":
		v.Checkpoint = config.Checkpoint{All: true}
	case "fp16":
		v.Precision = backend.Float16
	case "bf16":
		v.Precision = backend.BFloat16
	case "accum4":
		if err := accum4(); err != nil {
			return cfg, err
		}
	case "all":
		v.Checkpoint, v.Precision = config.Checkpoint{All: true}, backend.Float16
		if err := accum4(); err != nil {
			return cfg, err
		}
	case "offload":
		v.Checkpoint, v.Offload = config.Checkpoint{All: true}, true
	default:
		return cfg, fmt.Errorf("unknown variant %q; the variants are config, %s, offload", name, joinComma(VariantNames()))
	}
	c := cfg.WithVariant(v)
	return c, c.Validate()
}

func joinComma(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

// PlanRow is the predicted memory of one variant.
type PlanRow struct {
	// Name is the variant's name (see VariantNames).
	Name string `json:"variant"`
	config.Variant
	// PeakAllocatedBytes is the run's predicted peak allocated bytes (training
	// steps and validation); PeakByCategory its split at the peak.
	// PeakReservedBytes is what the run takes from the device at its most:
	// the pool's segments, cached free blocks included; memory.capacity is
	// checked against it.
	PeakAllocatedBytes int64            `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64            `json:"peak_reserved_bytes"`
	PeakByCategory     map[string]int64 `json:"peak_by_category"`
	// PeakByPhase is the peak allocated bytes of forward, backward, the
	// optimizer step and validation.
	PeakByPhase map[string]int64 `json:"peak_by_phase"`
	// RelativeTime is the estimated step time against baseline's (see Plan).
	RelativeTime float64 `json:"relative_time"`
	// Fits is set when a capacity was given: the peak reserved bytes are
	// within it.
	// OffloadedPeakBytes is the most the offloaded tensors take in host
	// memory (memory.offload; pinned on a GPU): device bytes this variant
	// does not hold.
	OffloadedPeakBytes int64  `json:"offloaded_peak_bytes,omitempty"`
	Fits               *bool  `json:"fits,omitempty"`
	Error              string `json:"error,omitempty"`
	// ArenaBytes is memory.allocator: arena's block (0 for caching), and
	// ArenaMisses the allocations its plan did not foresee (0 when exact).
	ArenaBytes  int64 `json:"arena_bytes,omitempty"`
	ArenaMisses int64 `json:"arena_misses,omitempty"`
	// Config is the variant's configuration.
	Config config.Config `json:"-"`
	// DataBytes is what the dataset holds beside the batches while they
	// are filled (data.HeldBytes, one sample per core at a time).
	DataBytes int64 `json:"-"`
	// TensorBytes is the largest parameter's fp32 bytes: what writing a
	// checkpoint holds at once (one tensor at a time).
	TensorBytes int64 `json:"-"`
}

// ConvLibraryPlan is a convolution library's choices for the
// convolutions asked of it (a GPU with cuDNN): what plan prints below its
// table.
type ConvLibraryPlan struct {
	// Library names it ("cuDNN 9.6.0 (CUDA 12.6) from /path").
	Library string
	// BudgetBytes is cuda.workspace in bytes.
	BudgetBytes int64
	Choices     []cuda.LibraryChoice
}

// LibraryPlan is what the library computing cfg's convolutions on its
// device chose for the convolutions asked of it in this process (the
// plans' among them), nil where none computes them (the CPU, memunet's
// kernels).
func LibraryPlan(cfg config.Config) *ConvLibraryPlan {
	b, err := Target(cfg)
	if err != nil {
		return nil
	}
	return LibraryPlanOn(cfg, b)
}

// LibraryPlanOn is LibraryPlan on backend b.
func LibraryPlanOn(cfg config.Config, b backend.Backend) *ConvLibraryPlan {
	cr, ok := b.(device.ConvResolver)
	if !ok || cr.ConvProvider().CUDNN == "" {
		return nil
	}
	return &ConvLibraryPlan{Library: cr.ConvProvider().CUDNN, BudgetBytes: cfg.ConvPolicy().WorkspaceBytes, Choices: cr.ConvChoices()}
}

// PhaseValidation names validation's peak in PlanRow.PeakByPhase.
const PhaseValidation = "validation"

// PlanConfig predicts the peak memory of training with cfg, exactly, by a
// dry run: the trainer is built on the planning backend (backend/noop: the
// target backend's sizes, a virtual pool that accounts every allocation
// without memory, no arithmetic) and runs two rounds of two optimizer steps and a
// validation without computing anything. Every allocation of a real run
// happens in the same order with the same sizes, so the statistics are those
// of the real run, byte for byte; it takes milliseconds.
func PlanConfig(cfg config.Config) (PlanRow, error) {
	if err := cfg.Validate(); err != nil {
		return PlanRow{Config: cfg}, err
	}
	return planConfig(cfg)
}

// PlanConfigOn is PlanConfig for backend b instead of the one config key
// device names.
func PlanConfigOn(cfg config.Config, b backend.Backend) (PlanRow, error) {
	if err := cfg.Validate(); err != nil {
		return PlanRow{Config: cfg}, err
	}
	return planConfigOn(cfg, b)
}

// planConfig is PlanConfig for a validated cfg.
func planConfig(cfg config.Config) (PlanRow, error) {
	b, err := Target(cfg)
	if err != nil {
		return PlanRow{Config: cfg}, err
	}
	return planConfigOn(cfg, b)
}

// planConfigOn plans cfg with b's sizes.
func planConfigOn(cfg config.Config, b backend.Backend) (PlanRow, error) {
	if cfg.Model.Checkpoint.Auto {
		var err error
		if cfg, _, err = ChooseRecompute(cfg, b); err != nil {
			return PlanRow{Config: cfg}, err
		}
	}
	cfg.Memory.Capacity, cfg.Memory.Fit = 0, "off" // predict the need, not the failure
	row := PlanRow{Variant: cfg.Variant(), PeakByPhase: map[string]int64{}, Config: cfg}
	var opts memory.Options
	if cfg.Memory.Allocator == "arena" {
		plan, err := ArenaPlan(cfg, b)
		if err != nil {
			return row, err
		}
		opts.Arena = &plan
	}
	t, err := buildTrainerWith(cfg, noop.New(b), opts, dist.Single{})
	if err != nil {
		return row, err
	}
	defer t.Close()
	row.DataBytes = data.HeldBytes(t.data, runtime.GOMAXPROCS(0))
	for _, p := range t.Net.Params() {
		row.TensorBytes = max(row.TensorBytes, int64(4*p.Len()))
	}
	note := func(st memory.Stats) {
		if st.Allocated.Peak > row.PeakAllocatedBytes {
			row.PeakAllocatedBytes = st.Allocated.Peak
			row.PeakByCategory = PhaseMemoryOf(st).PeakByCategory
		}
		row.PeakReservedBytes = max(row.PeakReservedBytes, st.Reserved.Peak)
	}
	note(t.Pool().Stats()) // building the model, Adam and the batch buffers
	err = runPlanProgram(t, func(res StepResult) {
		for phase, pm := range res.Phases {
			row.PeakByPhase[phase] = max(row.PeakByPhase[phase], pm.PeakAllocatedBytes)
			if pm.PeakAllocatedBytes > row.PeakAllocatedBytes {
				row.PeakAllocatedBytes, row.PeakByCategory = pm.PeakAllocatedBytes, pm.PeakByCategory
			}
			row.PeakReservedBytes = max(row.PeakReservedBytes, pm.PeakReservedBytes)
		}
	}, func(st memory.Stats) {
		row.PeakByPhase[PhaseValidation] = max(row.PeakByPhase[PhaseValidation], st.Allocated.Peak)
		note(st)
	})
	if err != nil {
		return row, err
	}
	st := t.Pool().Stats()
	row.ArenaBytes, row.ArenaMisses = st.ArenaBytes, st.ArenaMisses
	row.RelativeTime = relativeCost(t.Net, cfg)
	row.OffloadedPeakBytes = t.OffloadedPeak()
	return row, nil
}

// runPlanProgram runs plan's dry-run program on t: two rounds of two steps
// and a validation, after which the caching pool's blocks are in the state
// every later round repeats. step sees each step's result, validated the
// pool's statistics after each validation (peaks reset before it).
func runPlanProgram(t *Trainer, step func(StepResult), validated func(memory.Stats)) error {
	for i := range 4 {
		res, err := t.Step()
		if err != nil {
			return err
		}
		step(res)
		if i%2 == 1 {
			t.Pool().ResetPeak()
			if _, err := t.Validate(); err != nil {
				return err
			}
			validated(t.Pool().Stats())
		}
	}
	return nil
}

// ArenaPlan is memory.allocator: arena's plan for cfg on backend b: a dry
// run of plan's program on the planning backend, traced, packed by
// memory.PlanArena. Training repeats the traced steps and validations, so
// every buffer has its place; the arena is what the device gives up.
func ArenaPlan(cfg config.Config, b backend.Backend) (memory.ArenaPlan, error) {
	return arenaPlan(cfg, b, dist.Single{})
}

// arenaPlan is ArenaPlan for the rank comm stands for.
func arenaPlan(cfg config.Config, b backend.Backend, comm dist.Comm) (memory.ArenaPlan, error) {
	cfg.Memory.Capacity, cfg.Memory.Fit = 0, "off"
	t, err := buildTrainerWith(cfg, noop.New(b), memory.Options{Trace: true}, comm)
	if err != nil {
		return memory.ArenaPlan{}, err
	}
	defer t.Close()
	if err := runPlanProgram(t, func(StepResult) {}, func(memory.Stats) {}); err != nil {
		return memory.ArenaPlan{}, err
	}
	return memory.PlanArena(t.Pool().Trace())
}

// relativeCost estimates a step's time in units of the same step without
// recompute in fp32 with one micro-batch: the convolution FLOPs of
// forward + backward (3x forward) plus the recomputed blocks' recompute,
// times 1.02 for 16-bit storage and 1 + 0.04 per extra micro-batch. The two
// factors were measured on a 2-core machine (fp16/bf16 1.00-1.03x on the
// seed UNet since the CPU computes on 16-bit tensors without staging them,
// accum4 ~1.05-1.13x); they are estimates for ranking, not promises.
func relativeCost(net *model.UNet, cfg config.Config) float64 {
	h, w := cfg.ImageSize()
	fwd, rec := net.FLOPs(h, w)
	cost := (3*fwd + rec) / (3 * fwd)
	if cfg.Train.Precision != backend.Float32 {
		cost *= 1.02
	}
	return cost * (1 + 0.04*float64(cfg.Train.Accumulate-1))
}

// Plan predicts every named variant of cfg (see DeriveVariant and
// PlanConfig). With a capacity (bytes, 0 for none) each row says whether it
// fits, and recommended is the fitting variant with the lowest estimated
// time ("" if none fits); where a setting between the variants is faster
// still (or is the only one that fits), it is the last row, named
// FastestFitName, and recommended.
func Plan(cfg config.Config, names []string, capacity int64) (rows []PlanRow, recommended string, err error) {
	best := -1
	for _, name := range names {
		vc, err := DeriveVariant(cfg, name)
		row := PlanRow{Name: name}
		if err == nil && vc.Model.Checkpoint.Auto && capacity > 0 {
			vc.Memory.Capacity = config.ByteSize(capacity) // auto fits the capacity planned for
		}
		if err == nil {
			row, err = planConfig(vc) // DeriveVariant validated it
			row.Name = name
		}
		if err != nil {
			var oom *memory.OutOfMemoryError
			if errors.As(err, &oom) {
				return nil, "", err // cannot happen on an unlimited virtual pool
			}
			row.Error = err.Error()
			rows = append(rows, row)
			continue
		}
		if capacity > 0 {
			fits := row.PeakReservedBytes <= capacity
			row.Fits = &fits
			if fits && (best < 0 || row.RelativeTime < rows[best].RelativeTime) {
				best = len(rows)
			}
		}
		rows = append(rows, row)
	}
	if capacity > 0 {
		// A setting between the named variants may be faster still.
		fit, ok, err := fastestFit(cfg, capacity)
		if err != nil {
			return nil, "", err
		}
		if ok && (best < 0 || fit.RelativeTime < rows[best].RelativeTime) {
			fits := true
			fit.Fits = &fits
			best = len(rows)
			rows = append(rows, fit)
		}
	}
	if best >= 0 {
		recommended = rows[best].Name
	}
	return rows, recommended, nil
}
