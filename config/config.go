package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda/cudnn"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/internal/yamlvalue"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/optim"
	"github.com/memunet/memunet/tiles"
	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration of a run.
type Config struct {
	// Device is what the run computes on: auto (the GPU in a gpu build, else
	// the CPU), cpu, cuda or cuda:N.
	Device device.Spec `yaml:"device"`
	Model  Model       `yaml:"model"`
	Data   data.Config `yaml:"data"`
	Train  Train       `yaml:"train"`
	Memory Memory      `yaml:"memory"`
	Dist   Dist        `yaml:"dist"`
	CUDA   CUDA        `yaml:"cuda"`
	Output Output      `yaml:"output"`
	// Predict is how prediction, eval and validation slide tiles over
	// images too large to take whole (package tiles).
	Predict Predict `yaml:"predict"`
	// Invocation is not a key: it is how the user gave this config (the
	// program, --config, --set), set by the command line after loading, so
	// that hints name commands the user can paste.
	Invocation Invocation `yaml:"-" json:"-"`
}

// Predict is the predict section: sliding-window (tiled) prediction.
type Predict struct {
	// Tile is the tiles' side (a multiple of 2^model.depth); 0: whole
	// images where they fit, else the largest tile that does (predict),
	// the patch's side (validation of a data.patch run).
	Tile int `yaml:"tile"`
	// Overlap is the share of a tile its neighbour covers, in [0, 0.9].
	Overlap float64 `yaml:"overlap"`
	// Blend weighs the tiles: gaussian (sigma tile/8) or constant.
	Blend string `yaml:"blend"`
}

// CUDA is the CUDA backend's switches (a gpu build computing on cuda).
type CUDA struct {
	// SyncLaunches waits for the device after every kernel launch, so that
	// a fault names the kernel that caused it (MEMUNET_CUDA_SYNC=1 does the
	// same); slower, for finding faults.
	SyncLaunches bool `yaml:"sync_launches"`
	// TF32 runs fp32 convolutions on the tensor cores with their operands
	// rounded to TF32 (10 mantissa bits), as PyTorch's cuDNN convolutions
	// do by default; false runs them exactly in fp32 (slower). 16-bit
	// convolutions use the tensor cores either way.
	TF32 bool `yaml:"tf32"`
	// Conv is the convolution provider (ConvProviders): cudnn (NVIDIA's
	// cuDNN, loaded at run time; a named error before any training where
	// no usable library is found), memunet (memunet's own kernels), or
	// auto (cuDNN where it loads, else memunet's kernels). The run names
	// the library that computed its convolutions, 2D and 3D, each pass by
	// the algorithm WorkspaceMiB and Deterministic admit. The CPU accepts
	// the cuda keys and ignores them.
	Conv string `yaml:"conv"`
	// WorkspaceMiB bounds the device memory cuDNN may use as workspace for
	// one convolution pass, in MiB (0: only algorithms that need none). The
	// plan counts it like any other buffer.
	WorkspaceMiB int `yaml:"workspace"`
	// Deterministic admits only cuDNN algorithms that give the same bits
	// on every run (resume stays bit-exact); false also admits the
	// nondeterministic ones (atomics in backward data and filter), which
	// may be faster.
	Deterministic bool `yaml:"deterministic"`
}

// ConvProviders are cuda.conv's values.
var ConvProviders = []string{"auto", "cudnn", "memunet"}

// DefaultWorkspaceMiB is cuda.workspace's default: 256 MiB is 4x the seed
// UNet's largest activation at base 64, 256 px, batch 4 in fp32 (64 MiB),
// room for the implicit-GEMM and Winograd algorithms cuDNN ranks fastest
// on 3x3 convolutions of that size, and under 0.5% of an 80 GB GPU; it
// bounds one pass's workspace, and the passes run one at a time, so a
// run holds one workspace, not one per layer.
const DefaultWorkspaceMiB = 256

// MaxWorkspaceMiB bounds cuda.workspace (1 TiB, far beyond any GPU), so
// that its bytes cannot overflow.
const MaxWorkspaceMiB = 1 << 20

// Dist is data-parallel training's communication (memunet train under
// mpirun, built with -tags mpi).
type Dist struct {
	// BucketMB bounds one gradient all-reduce, in MiB (0: all gradients in
	// one call).
	BucketMB int `yaml:"bucket_mb"`
	// SyncBatchNorm normalizes with the statistics of the whole batch over
	// every rank (PyTorch's SyncBatchNorm) instead of each rank's own.
	SyncBatchNorm bool `yaml:"sync_batchnorm"`
}

// Model is the UNet's architecture (see model.Config).
type Model struct {
	model.Arch `yaml:",inline"`
	// Seed draws the initial weights.
	Seed uint64 `yaml:"seed"`
	// Checkpoint is none, all, or a list of levels (0 = full size .. depth).
	Checkpoint Checkpoint `yaml:"checkpoint"`
	// ConvAlgo is direct, winograd or auto (see backend.ConvAlgo).
	ConvAlgo string `yaml:"conv_algo"`
}

// Train is the optimization.
type Train struct {
	// Optimizer is adam, adamw, sgd or rmsprop (optim.Kind): PyTorch's
	// update rules; Momentum, Dampening and Nesterov are SGD's (Momentum
	// RMSprop's too), Alpha RMSprop's, Betas Adam's and AdamW's.
	Optimizer   string    `yaml:"optimizer"`
	Momentum    float64   `yaml:"momentum"`
	Dampening   float64   `yaml:"dampening"`
	Nesterov    bool      `yaml:"nesterov"`
	Alpha       float64   `yaml:"alpha"`
	BatchSize   int       `yaml:"batch_size"`
	Steps       int       `yaml:"steps"`
	Epochs      int       `yaml:"epochs"`
	LR          float64   `yaml:"lr"`
	Betas       []float64 `yaml:"betas"`
	Eps         float64   `yaml:"eps"`
	WeightDecay float64   `yaml:"weight_decay"`
	Seed        uint64    `yaml:"seed"`
	ValEvery    int       `yaml:"val_every"`
	// Precision is fp32, fp16 or bf16: the storage of activations, activation
	// gradients and the working copy of the weights.
	Precision backend.DType `yaml:"precision"`
	// Accumulate is the number of micro-batches of batch_size per optimizer step.
	Accumulate int    `yaml:"accumulate"`
	Scaler     Scaler `yaml:"scaler"`
	// ClipGradNorm is the largest global L2 norm of the trainable
	// parameters' gradients (torch.nn.utils.clip_grad_norm_, once per
	// optimizer step, after the scaler unscales them); 0: no clipping.
	ClipGradNorm float64 `yaml:"clip_grad_norm"`
	// Schedule is the learning rate over the run (see optim.Schedule).
	Schedule Schedule `yaml:"schedule"`
	// Loss is the training (and validation) loss (see model.Loss).
	Loss Loss `yaml:"loss"`
	// Monitor is the validation score that picks the best checkpoint,
	// drives early stopping and a plateau schedule: val_miou, val_dice,
	// val_pixel_acc (higher is better) or val_loss (lower is better).
	Monitor string `yaml:"monitor"`
	// EarlyStop ends the run when Monitor has not improved by more than
	// MinDelta for Patience scheduled validations (0: never).
	EarlyStop EarlyStop `yaml:"early_stop"`
	// Init is weights to start from instead of the random initialization
	// (fine-tuning): a memunet run or checkpoint directory, or a safetensors
	// file with PyTorch state_dict names (memunet export's, or PyTorch's);
	// InitSkip lists name prefixes to leave at their initialization (a new
	// head: outc). Freeze lists name prefixes the optimizer leaves as they
	// are (encoder: inc and every down block).
	Init     string   `yaml:"init"`
	InitSkip []string `yaml:"init_skip"`
	Freeze   []string `yaml:"freeze"`
	// CheckpointEvery saves a checkpoint every N optimizer steps (0: only at
	// the end and on SIGINT/SIGTERM, which always save one).
	CheckpointEvery int `yaml:"checkpoint_every"`
	// KeepLast is how many of the newest checkpoints to keep (0: all).
	KeepLast int `yaml:"keep_last"`
	// KeepBest also keeps the checkpoint with the highest val_miou, saving
	// one after every validation that improves it.
	KeepBest bool `yaml:"keep_best"`
}

// Schedule is train.schedule: the learning rate over the run's steps,
// from train.lr (optim.Schedule has the formulas).
type Schedule struct {
	// Kind is constant, step (x gamma every step_size steps), cosine
	// (linear warmup over warmup steps, then cosine down to min_lr, reached
	// after the last step), plateau (x factor when train.monitor has not improved by more
	// than threshold, relative, for more than patience validations) or
	// poly ((1 - step/steps)^power: nnU-Net's).
	Kind      string  `yaml:"kind"`
	Warmup    int     `yaml:"warmup"`
	StepSize  int     `yaml:"step_size"`
	Gamma     float64 `yaml:"gamma"`
	MinLR     float64 `yaml:"min_lr"`
	Patience  int     `yaml:"patience"`
	Factor    float64 `yaml:"factor"`
	Threshold float64 `yaml:"threshold"`
	Power     float64 `yaml:"power"`
}

// EarlyStop is train.early_stop.
type EarlyStop struct {
	Patience int     `yaml:"patience"`
	MinDelta float64 `yaml:"min_delta"`
}

// Loss is train.loss: kind ce, dice, ce+dice or focal; class weights for
// the cross-entropy and focal terms; focal's gamma; Dice's smoothing.
type Loss struct {
	Kind         string       `yaml:"kind"`
	ClassWeights ClassWeights `yaml:"class_weights"`
	Gamma        float64      `yaml:"gamma"`
	DiceSmooth   float64      `yaml:"dice_smooth"`
}

// ClassWeights is train.loss.class_weights: [] (every class 1), auto (from
// the training set's class frequencies: train.ClassWeights) or one weight
// per class.
type ClassWeights struct {
	Auto   bool
	Values []float64
}

// UnmarshalYAML accepts auto or a list of numbers.
func (w *ClassWeights) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*w = ClassWeights{Auto: true}
		return nil
	}
	var l yamlvalue.FloatList
	if err := l.UnmarshalYAML(n); err != nil {
		return fmt.Errorf("cannot use %s: want auto or a list of one weight per class, e.g. [1, 5, 1]", yamlvalue.Describe(n))
	}
	*w = ClassWeights{Values: l}
	return nil
}

// MarshalYAML writes auto or the list.
func (w ClassWeights) MarshalYAML() (any, error) {
	if w.Auto {
		return "auto", nil
	}
	if w.Values == nil {
		return []float64{}, nil
	}
	return w.Values, nil
}

// LossConfig is train.loss as model takes it, with weights (nil: none,
// or auto's, which the trainer computes from the data).
func (c Config) LossConfig(weights []float64) model.LossConfig {
	l := c.Train.Loss
	if !l.ClassWeights.Auto {
		weights = l.ClassWeights.Values
	}
	return model.LossConfig{Kind: model.LossKind(l.Kind), Weights: weights, Gamma: l.Gamma, DiceSmooth: l.DiceSmooth}
}

// Monitors are train.monitor's values.
var Monitors = []string{"val_miou", "val_dice", "val_miou_fg", "val_dice_fg", "val_pixel_acc", "val_loss"}

// OptimizerConfig is the optimizer section of train as optim takes it.
func (c Config) OptimizerConfig() optim.Config {
	t := c.Train
	oc := optim.Config{Kind: optim.Kind(t.Optimizer), LR: t.LR, WeightDecay: t.WeightDecay, Eps: t.Eps,
		Momentum: t.Momentum, Dampening: t.Dampening, Nesterov: t.Nesterov, Alpha: t.Alpha}
	if len(t.Betas) == 2 {
		oc.Beta1, oc.Beta2 = t.Betas[0], t.Betas[1]
	}
	return oc
}

// LRSchedule is train.schedule over a run of total optimizer steps.
func (c Config) LRSchedule(total int) optim.Schedule {
	s := c.Train.Schedule
	return optim.Schedule{Kind: optim.ScheduleKind(s.Kind), LR: c.Train.LR, MinLR: s.MinLR, Warmup: s.Warmup, Total: total,
		StepSize: s.StepSize, Gamma: s.Gamma, Patience: s.Patience, Factor: s.Factor, Threshold: s.Threshold,
		Minimize: c.Train.Monitor == "val_loss", Power: s.Power}
}

// Scaler is the dynamic loss scaler for fp16 (PyTorch's GradScaler rule).
type Scaler struct {
	// Enabled is auto (on for fp16 only), true or false.
	Enabled        Switch  `yaml:"enabled"`
	InitScale      float64 `yaml:"init_scale"`
	GrowthFactor   float64 `yaml:"growth_factor"`
	BackoffFactor  float64 `yaml:"backoff_factor"`
	GrowthInterval int     `yaml:"growth_interval"`
}

// Memory configures the accounted pool.
type Memory struct {
	Capacity ByteSize `yaml:"capacity"`
	Timeline bool     `yaml:"timeline"`
	// EmptyCache is never, step (release cached blocks after every optimizer
	// step) or oom (on an out-of-memory error, release and retry the step once).
	EmptyCache EmptyCache `yaml:"empty_cache"`
	// Offload is none, or checkpoints: what checkpointed blocks keep for
	// backward (their inputs; a decoder's input parts and first
	// convolution's output) waits in host memory (pinned on a GPU) instead
	// of the device's, copied back when their backward needs it.
	Offload Offload `yaml:"offload"`
	// Fit is off, or auto: under memory.capacity, train the first variant
	// that plan says fits (see train.FitCandidates), and move on to the next
	// on an out-of-memory error during training.
	Fit string `yaml:"fit"`
	// Allocator is caching (segments, split and merge: memory.Pool) or
	// arena: a dry run plans every buffer's place in one block, taken once
	// (memory.PlanArena); what the plan did not foresee goes to the cache.
	Allocator string `yaml:"allocator"`
	// Poison fills every freed buffer with NaN: a buffer used after it is
	// freed, or two sharing memory, then shows in the losses (debugging).
	Poison bool `yaml:"poison"`
}

// Allocators are memory.allocator's values.
var Allocators = []string{"caching", "arena"}

// Output says where and how results are written.
type Output struct {
	Dir      string `yaml:"dir"`
	Progress string `yaml:"progress"`
	LogEvery int    `yaml:"log_every"`
	// TensorBoard writes RUN/tb/events.out.tfevents.* (package tensorboard).
	TensorBoard bool `yaml:"tensorboard"`
}

// Default is the configuration every file starts from: the quickstart run on
// the built-in synthetic shapes.
func Default() Config {
	return Config{
		Device: device.Spec{Kind: device.Auto},
		Model:  Model{Arch: model.Arch{InChannels: 3, Classes: 4, Base: 8, Depth: 3, Up: "bilinear", Norm: "batch", Groups: 8, Dims: 2}, Seed: 1, ConvAlgo: "auto"},
		Data: data.Config{Source: "synthetic", Count: 512, Size: 32, Noise: 0.1, Seed: 1, ValFraction: 0.125, Split: data.SplitAuto, NIfTI: data.NIfTIConfig{Axis: 2, Normalize: data.NormalizeWindow},
			PatchForeground: 0.33, Augment: data.DefaultAugment(),
			Mean: yamlvalue.FloatList{data.Mean}, Std: yamlvalue.FloatList{data.Std}},
		Train: Train{Optimizer: "adam", Alpha: 0.99, BatchSize: 8, Steps: 800, LR: 3e-3, Betas: []float64{0.9, 0.999}, Eps: 1e-8, Seed: 1, ValEvery: 200,
			Precision: backend.Float32, Accumulate: 1, CheckpointEvery: 200, KeepLast: 2, KeepBest: true,
			Scaler:   Scaler{Enabled: "auto", InitScale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000},
			Schedule: Schedule{Kind: "constant", StepSize: 1000, Gamma: 0.1, Patience: 5, Factor: 0.1, Threshold: 1e-4, Power: 0.9},
			Loss:     Loss{Kind: "ce", Gamma: 2, DiceSmooth: 1},
			Monitor:  "val_miou"},
		Memory:  Memory{EmptyCache: EmptyNever, Offload: OffloadNone, Fit: "off", Allocator: "arena"},
		Dist:    Dist{BucketMB: 16},
		CUDA:    CUDA{TF32: true, Conv: "auto", WorkspaceMiB: DefaultWorkspaceMiB, Deterministic: true},
		Output:  Output{Progress: "auto", LogEvery: 10, TensorBoard: true},
		Predict: Predict{Overlap: 0.25, Blend: tiles.Gaussian},
	}
}

// ConvPolicy is how the CUDA backend chooses cuDNN's algorithms: within
// cuda.workspace's bytes, deterministic ones only with cuda.deterministic.
func (c Config) ConvPolicy() cudnn.Policy {
	return cudnn.Policy{WorkspaceBytes: int64(c.CUDA.WorkspaceMiB) << 20, Deterministic: c.CUDA.Deterministic}
}

// ModelConfig is the model section as the model package takes it.
func (c Config) ModelConfig() model.Config {
	return model.Config{Arch: c.Model.Arch, Recompute: c.Model.Checkpoint.Resolve(c.Model.Depth), ConvAlgo: convAlgo(c.Model.ConvAlgo)}
}

// convAlgo is model.conv_algo's algorithm (Validate refuses other names).
func convAlgo(name string) backend.ConvAlgo {
	a, _ := backend.ParseConvAlgo(name)
	return a
}

// ImageSize is the (H, W) the model sees (a volume's slices stacked, so
// (D*H, W): see data.Volumes): data.resize if set, else data.size
// for the synthetic data, or for folder and voc the size of the first image
// (its file header is read; see data.ProbeSize), times data.scale. It is
// 0, 0 when the files cannot tell.
func (c Config) ImageSize() (h, w int) {
	h, w, err := data.ProbeSize(c.DataConfig())
	if err != nil {
		return 0, 0
	}
	return h, w
}

// SampleSize words the samples' size the model sees: "64x64 images", or
// "32x32x32 volumes" for a 3D UNet; "" when the files cannot tell.
func (c Config) SampleSize() string {
	d, h, w, err := data.ProbeShape(c.DataConfig())
	switch {
	case err != nil || h <= 0 || w <= 0:
		return ""
	case c.Model.Volumes():
		return fmt.Sprintf("%dx%dx%d volumes", d, h, w)
	}
	return fmt.Sprintf("%dx%d images", h, w)
}

// DataConfig is the data section with what it needs of the model, as the
// data package takes it.
func (c Config) DataConfig() data.SourceConfig {
	return data.SourceConfig{Config: c.Data, Channels: c.Model.InChannels, Classes: c.Model.Classes, SizeMultiple: 1 << c.Model.Depth,
		Dims: c.Model.Dims, DepthMultiple: c.Model.Reduction().D}
}

// ScalerEnabled resolves train.scaler.enabled: auto means fp16 only.
func (c Config) ScalerEnabled() bool {
	switch c.Train.Scaler.Enabled {
	case "true":
		return true
	case "false":
		return false
	}
	return c.Train.Precision == backend.Float16
}

// Bounds on counts, so that their products (train.batch_size x
// train.accumulate x ranks, train.epochs x batches per epoch) stay far from
// overflowing and nothing sized by them can take the machine; data.count's
// is data.MaxSyntheticCount.
const (
	MaxBatchSize  = 1 << 16
	MaxAccumulate = 1 << 16
	MaxEpochs     = 1_000_000
	MaxSteps      = 1_000_000_000
	MaxBucketMB   = 1 << 20
)

// Validate reports the first invalid value, naming its key, the value and what
// is allowed.
func (c Config) Validate() error {
	// The widest level has base * 2^depth channels (depth is at most 8); a base
	// so large that this overflows makes model.Config.Validate divide by zero.
	if err := c.Model.Arch.Validate(); err != nil {
		return err
	}
	if _, ok := backend.ParseConvAlgo(c.Model.ConvAlgo); !ok {
		return fmt.Errorf("model.conv_algo: %q: must be %q, %q or %q", c.Model.ConvAlgo, "direct", "winograd", "auto")
	}
	if err := c.DataConfig().Validate(); err != nil {
		return err
	}
	t := c.Train
	switch {
	case t.BatchSize < 1 || t.BatchSize > MaxBatchSize:
		return fmt.Errorf("train.batch_size: %d: must be at least 1 and at most %d", t.BatchSize, MaxBatchSize)
	case t.Steps < 0 || t.Steps > MaxSteps:
		return fmt.Errorf("train.steps: %d: must be 0 (use train.epochs) or more, at most %d", t.Steps, MaxSteps)
	case t.Epochs < 0 || t.Epochs > MaxEpochs:
		return fmt.Errorf("train.epochs: %d: must be 0 (use train.steps) or more, at most %d", t.Epochs, MaxEpochs)
	case t.Steps == 0 && t.Epochs == 0:
		return fmt.Errorf("train.steps and train.epochs are both 0: set one of them")
	case t.Steps > 0 && t.Epochs > 0:
		return fmt.Errorf("train.steps (%d) and train.epochs (%d) are both set: set only one", t.Steps, t.Epochs)
	case !(t.LR > 0) || math.IsInf(t.LR, 0):
		return fmt.Errorf("train.lr: %g: must be a positive finite number, e.g. 0.003", t.LR)
	case len(t.Betas) != 2 || !(t.Betas[0] >= 0 && t.Betas[0] < 1) || !(t.Betas[1] >= 0 && t.Betas[1] < 1):
		return fmt.Errorf("train.betas: %v: must be two numbers in [0,1), e.g. [0.9, 0.999]", t.Betas)
	case !(t.Eps > 0) || math.IsInf(t.Eps, 0):
		return fmt.Errorf("train.eps: %g: must be a positive finite number, e.g. 1e-8", t.Eps)
	case !(t.WeightDecay >= 0) || math.IsInf(t.WeightDecay, 0):
		return fmt.Errorf("train.weight_decay: %g: must be a finite number, 0 or more", t.WeightDecay)
	case !(t.ClipGradNorm >= 0) || math.IsInf(t.ClipGradNorm, 0):
		return fmt.Errorf("train.clip_grad_norm: %g: must be 0 (no clipping) or a positive finite norm, e.g. 12 (nnU-Net's)", t.ClipGradNorm)
	case t.ValEvery < 0:
		return fmt.Errorf("train.val_every: %d: must be 0 (only at the end) or more", t.ValEvery)
	case c.Memory.Capacity < 0 && c.Memory.Capacity != CapacityAuto:
		return fmt.Errorf("memory.capacity: %d: must be 0 (unlimited), a size such as 6GiB, or auto", c.Memory.Capacity)
	case c.Output.Progress != "auto" && c.Output.Progress != "bar" && c.Output.Progress != "plain" && c.Output.Progress != "none":
		return fmt.Errorf("output.progress: %q: must be auto, bar, plain or none", c.Output.Progress)
	case c.Output.LogEvery < 1:
		return fmt.Errorf("output.log_every: %d: must be at least 1", c.Output.LogEvery)
	case c.Predict.Tile < 0 || c.Predict.Tile%(1<<c.Model.Depth) != 0 || c.Predict.Tile > data.MaxResizeSize:
		return fmt.Errorf("predict.tile: %d: a tile's side must be a multiple of 2^model.depth = %d up to %d, e.g. %d, or 0 (whole images where they fit)",
			c.Predict.Tile, 1<<c.Model.Depth, data.MaxResizeSize, 16<<c.Model.Depth)
	case tiles.ValidateOverlap("predict.overlap:", c.Predict.Overlap) != nil:
		return tiles.ValidateOverlap("predict.overlap:", c.Predict.Overlap)
	case tiles.ValidateBlend("predict.blend:", c.Predict.Blend) != nil:
		return tiles.ValidateBlend("predict.blend:", c.Predict.Blend)
	}
	return c.validateVariants()
}

// Marshal writes the configuration as YAML (the resolved config of a run).
func (c Config) Marshal() ([]byte, error) { return yaml.Marshal(c) }

// ByteSize is a number of bytes, written in YAML as an integer or with a
// binary or decimal unit: 6GiB, 512MiB, 1.5GB, 0 for unlimited.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

// CapacityAuto is memory.capacity: auto: the device's free memory when the
// run starts (a GPU), or 3/4 of the memory the process may use (the CPU:
// the least of MemAvailable, its cgroups and its rlimits); see
// train.ResolveCapacity.
const CapacityAuto ByteSize = -1

// ParseByteSize parses "6GiB", "512 MiB", "1.5GB", "1048576", and "auto"
// (CapacityAuto).
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if t == "AUTO" {
		return CapacityAuto, nil
	}
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1<<62 || v != v {
		return 0, fmt.Errorf("%q is not a size: write a number of bytes or one with a unit, such as 6GiB or 512MiB, or auto", s)
	}
	return ByteSize(v * mult), nil
}

// UnmarshalYAML accepts an integer or a string with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a size such as 6GiB")
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML writes the size in the largest binary unit that divides it
// (auto for CapacityAuto).
func (b ByteSize) MarshalYAML() (any, error) {
	if b == CapacityAuto {
		return "auto", nil
	}
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.m == 0 {
			return fmt.Sprintf("%d%s", int64(b)/u.m, u.s), nil
		}
	}
	return int64(b), nil
}

// validateVariants checks the memory-saving options.
func (c Config) validateVariants() error {
	t := c.Train
	if err := c.Model.Checkpoint.validate(c.Model.Depth); err != nil {
		return err
	}
	if t.Precision != backend.Float32 && !t.Precision.Half() {
		return fmt.Errorf("train.precision: %s: must be fp32, fp16 or bf16", t.Precision)
	}
	s := t.Scaler
	switch {
	case t.Accumulate < 1 || t.Accumulate > MaxAccumulate:
		return fmt.Errorf("train.accumulate: %d: must be at least 1 and at most %d (micro-batches of train.batch_size per optimizer step)", t.Accumulate, MaxAccumulate)
	case s.Enabled != "auto" && s.Enabled != "true" && s.Enabled != "false":
		return fmt.Errorf("train.scaler.enabled: %q: must be auto, true or false", s.Enabled)
	case !(s.InitScale > 0) || math.IsInf(s.InitScale, 0):
		return fmt.Errorf("train.scaler.init_scale: %g: must be a positive number such as 65536", s.InitScale)
	case !(s.GrowthFactor > 1) || math.IsInf(s.GrowthFactor, 0):
		return fmt.Errorf("train.scaler.growth_factor: %g: must be greater than 1, e.g. 2", s.GrowthFactor)
	case !(s.BackoffFactor > 0 && s.BackoffFactor < 1):
		return fmt.Errorf("train.scaler.backoff_factor: %g: must be between 0 and 1, e.g. 0.5", s.BackoffFactor)
	case s.GrowthInterval < 1:
		return fmt.Errorf("train.scaler.growth_interval: %d: must be at least 1, e.g. 2000", s.GrowthInterval)
	case t.CheckpointEvery < 0:
		return fmt.Errorf("train.checkpoint_every: %d: must be 0 (only at the end and on interrupt) or more", t.CheckpointEvery)
	case t.KeepLast < 0:
		return fmt.Errorf("train.keep_last: %d: must be 0 (keep every checkpoint) or more", t.KeepLast)
	case c.Memory.EmptyCache != EmptyNever && c.Memory.EmptyCache != EmptyStep && c.Memory.EmptyCache != EmptyOOM:
		return fmt.Errorf("memory.empty_cache: %q: must be never, step or oom", c.Memory.EmptyCache)
	case t.validateSchedule() != nil:
		return t.validateSchedule()
	case t.validateOptimizer() != nil:
		return t.validateOptimizer()
	case t.validateLoss(c.Model.Classes) != nil:
		return t.validateLoss(c.Model.Classes)
	case !slices.Contains(Monitors, c.Train.Monitor):
		return fmt.Errorf("train.monitor: %q: must be one of %s", c.Train.Monitor, strings.Join(Monitors, ", "))
	case c.Train.EarlyStop.Patience < 0 || !(c.Train.EarlyStop.MinDelta >= 0):
		return fmt.Errorf("train.early_stop: patience %d and min_delta %g must be at least 0", c.Train.EarlyStop.Patience, c.Train.EarlyStop.MinDelta)
	case c.Train.EarlyStop.Patience > 0 && c.Train.ValEvery == 0:
		return fmt.Errorf("train.early_stop: stops on scheduled validations: set train.val_every (validations every N steps) too")
	case c.Train.Schedule.Kind == "plateau" && c.Train.ValEvery == 0:
		return fmt.Errorf("train.schedule: plateau decays on val mIoU: set train.val_every (validations every N steps) too")
	case c.Memory.Offload != OffloadNone && c.Memory.Offload != OffloadCheckpoints:
		return fmt.Errorf("memory.offload: %q: must be none or checkpoints", c.Memory.Offload)
	case c.Memory.Offload == OffloadCheckpoints && c.Model.Checkpoint.String() == "none":
		return fmt.Errorf("memory.offload: checkpoints keeps the inputs of checkpointed blocks in host memory: set model.checkpoint (all, or a list of levels) too")
	case c.Dist.BucketMB < 0 || c.Dist.BucketMB > MaxBucketMB:
		return fmt.Errorf("dist.bucket_mb: %d: must be 0 (one all-reduce) or a size in MiB up to %d, e.g. 16", c.Dist.BucketMB, MaxBucketMB)
	case !slices.Contains(ConvProviders, c.CUDA.Conv):
		return fmt.Errorf("cuda.conv: %q: must be auto, cudnn or memunet (who runs the convolutions on a GPU; ignored on the CPU)", c.CUDA.Conv)
	case c.CUDA.WorkspaceMiB < 0 || c.CUDA.WorkspaceMiB > MaxWorkspaceMiB:
		return fmt.Errorf("cuda.workspace: %d: must be 0 (only algorithms that need no workspace) or a size in MiB up to %d, e.g. %d",
			c.CUDA.WorkspaceMiB, MaxWorkspaceMiB, DefaultWorkspaceMiB)
	case !slices.Contains(Allocators, c.Memory.Allocator):
		return fmt.Errorf("memory.allocator: %q: must be caching or arena", c.Memory.Allocator)
	case c.Memory.Fit != "off" && c.Memory.Fit != "auto":
		return fmt.Errorf("memory.fit: %q: must be off or auto", c.Memory.Fit)
	case c.Memory.Fit == "auto" && c.Memory.Capacity == 0:
		return fmt.Errorf("memory.fit: auto needs memory.capacity, the size to fit in (e.g. 6GiB)")
	}
	return nil
}

// Checkpoint is model.checkpoint: "none", "all", or a list of levels.
type Checkpoint struct {
	All    bool
	Levels []int
	// Auto is model.checkpoint: auto: the levels the run checkpoints are
	// chosen to fit memory.capacity with the least recompute
	// (train.ChooseRecompute), before it is built.
	Auto bool
}

// Resolve gives the checkpointed levels for a network of the given depth.
// An unresolved Auto checkpoints nothing.
func (c Checkpoint) Resolve(depth int) []int {
	if c.All {
		return model.RecomputeAll(depth)
	}
	return c.Levels
}

func (c Checkpoint) validate(depth int) error {
	seen := map[int]bool{}
	for _, l := range c.Levels {
		if l < 0 || l > depth {
			return fmt.Errorf("model.checkpoint: level %d: levels go from 0 (full size) to model.depth = %d", l, depth)
		}
		if seen[l] {
			return fmt.Errorf("model.checkpoint: level %d is listed twice", l)
		}
		seen[l] = true
	}
	return nil
}

// String is the YAML form: none, all or the list.
func (c Checkpoint) String() string {
	switch {
	case c.Auto:
		return "auto"
	case c.All:
		return "all"
	case len(c.Levels) == 0:
		return "none"
	}
	return fmt.Sprint(c.Levels)
}

// UnmarshalYAML accepts none, all, or a list of integer levels.
func (c *Checkpoint) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.Value {
		case "none", "":
			*c = Checkpoint{}
			return nil
		case "all":
			*c = Checkpoint{All: true}
			return nil
		case "auto":
			*c = Checkpoint{Auto: true}
			return nil
		}
	case yaml.SequenceNode:
		var levels []int
		if err := n.Decode(&levels); err == nil {
			*c = Checkpoint{Levels: levels}
			return nil
		}
	}
	return fmt.Errorf("want none, all, auto, or a list of levels such as [0, 1]")
}

// Clone is c with a list of its own.
func (c Checkpoint) Clone() Checkpoint {
	c.Levels = slices.Clone(c.Levels)
	return c
}

// MarshalText is String (for JSON: "none", "all", "[0 2]").
func (c Checkpoint) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (c *Checkpoint) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch s {
	case "none", "":
		*c = Checkpoint{}
		return nil
	case "all":
		*c = Checkpoint{All: true}
		return nil
	case "auto":
		*c = Checkpoint{Auto: true}
		return nil
	}
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return fmt.Errorf("checkpoint %q: want none, all or a list of levels", s)
	}
	var levels []int
	for _, f := range strings.FieldsFunc(s[1:len(s)-1], func(r rune) bool { return r == ' ' || r == ',' }) {
		l, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("checkpoint %q: want none, all or a list of levels", s)
		}
		levels = append(levels, l)
	}
	*c = Checkpoint{Levels: levels}
	return nil
}

// MarshalYAML writes none, all or the list.
func (c Checkpoint) MarshalYAML() (any, error) {
	if c.All || c.Auto || len(c.Levels) == 0 {
		return c.String(), nil
	}
	return c.Levels, nil
}

// Switch is a setting that is auto, true or false.
type Switch string

// UnmarshalYAML accepts auto or a boolean.
func (s *Switch) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "auto" {
			*s = "auto"
			return nil
		}
		var b bool
		if err := n.Decode(&b); err == nil {
			*s = Switch(strconv.FormatBool(b))
			return nil
		}
	}
	return fmt.Errorf("want auto, true or false")
}

// MarshalYAML writes auto or a boolean.
func (s Switch) MarshalYAML() (any, error) {
	if b, err := strconv.ParseBool(string(s)); err == nil {
		return b, nil
	}
	return string(s), nil
}
