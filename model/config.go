package model

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// UpMode is how the decoder doubles the resolution.
type UpMode string

// NormKind is the normalization inside each DoubleConv.
type NormKind string

const (
	UpBilinear  UpMode = "bilinear"  // Upsample2 (align_corners=False), channels kept
	UpTranspose UpMode = "transpose" // UpConv 2x2 stride 2, channels halved

	NormBatch NormKind = "batch" // BatchNorm2d
	NormGroup NormKind = "group" // GroupNorm with Config.Groups groups
	NormNone  NormKind = "none"  // no norm; the convolutions get a bias instead
)

// MaxBase bounds Config.Base so that the widest level, Base*2^Depth, cannot
// overflow; no real network comes near it.
const MaxBase = 1 << 16

// Arch is the UNet's architecture, the config's model section as the YAML
// decodes it (package config holds it inline in its Model). Encoder widths
// are Base*2^i for i = 0..Depth, with 2x2 max pooling between levels; the
// input's height and width must be divisible by 2^Depth. Its Validate is
// the one check of these keys.
type Arch struct {
	InChannels int      `yaml:"in_channels"` // default 3
	Classes    int      `yaml:"classes"`     // default 2
	Base       int      `yaml:"base"`        // width of the first level; default 16
	Depth      int      `yaml:"depth"`       // number of down (and up) levels; default 4
	Up         UpMode   `yaml:"up"`          // default bilinear
	Norm       NormKind `yaml:"norm"`        // default batch
	Groups     int      `yaml:"groups"`      // groups for NormGroup (capped at a layer's width); default 8
	// Dims is 2 (images, the default; 0 means 2) or 3: a 3D UNet over
	// volumes (N,C,D,H,W), 3x3x3 convolutions, PyTorch's parameter names
	// with a depth axis in the weights.
	Dims int `yaml:"dims"`
	// MaxChannels caps every level's width (nnU-Net caps at 320); 0: none.
	MaxChannels int `yaml:"max_channels"`
	// PoolKernels are a 3D UNet's poolings into levels 1..Depth, each
	// [D, H, W] (kernel = stride per axis, D 1 or 2, H and W 2; the decoder
	// up-samples by the same), e.g. [1, 2, 2] where slices are thick;
	// empty: 2 on every axis.
	PoolKernels [][3]int `yaml:"pool_kernels,flow"`
}

// Volumes reports a 3D UNet.
func (c Arch) Volumes() bool { return c.Dims == 3 }

// Width is level lv's channels: Base*2^lv, capped at MaxChannels.
func (c Arch) Width(lv int) int {
	if w := c.Base << lv; c.MaxChannels == 0 || w < c.MaxChannels {
		return w
	}
	return c.MaxChannels
}

// PoolKernel is the pooling into level lv+1 (2 on every axis unless
// PoolKernels says otherwise).
func (c Arch) PoolKernel(lv int) backend.Scale3 {
	if lv < len(c.PoolKernels) {
		k := c.PoolKernels[lv]
		return backend.Scale3{D: k[0], H: k[1], W: k[2]}
	}
	return backend.Scale3{D: 2, H: 2, W: 2}
}

// Reduction is how much the poolings shrink each axis in all: 2^Depth on
// H and W, the product of the PoolKernels' on D (1 for images). An input's
// sides must be multiples of it.
func (c Arch) Reduction() backend.Scale3 {
	r := backend.Scale3{D: 1, H: 1 << c.Depth, W: 1 << c.Depth}
	if c.Volumes() {
		for lv := range c.Depth {
			r.D *= c.PoolKernel(lv).D
		}
	}
	return r
}

// Config is what New builds: the architecture, and how it computes, which
// leaves the weights as they are. New trusts it: the config package
// validated its parts when the config was loaded.
type Config struct {
	Arch
	// Recompute lists the resolution levels (0 = full size .. Depth = the
	// bottleneck) whose DoubleConv blocks recompute (gradient
	// checkpointing, the config's model.checkpoint): in forward they keep
	// only their input, in backward they recompute their activations. A
	// decoder with bilinear upsampling keeps its input's two parts (the
	// skip and the level below) and its conv1's output instead, and
	// rebuilds its input rather than run that convolution again. Level i
	// has the encoder block at that level and, below Depth, the decoder
	// block there too. Empty means none.
	Recompute []int
	// ConvAlgo is how the DoubleConvs' 3x3 convolutions are computed
	// (model.conv_algo): directly (the zero value), by Winograd's
	// F(2x2,3x3) where the backend has it, or auto (Winograd for the
	// layers wide enough to gain from it, F(4x4,3x3) where it can).
	ConvAlgo backend.ConvAlgo
}

// RecomputeAll is the Recompute list of every level for a depth.
func RecomputeAll(depth int) []int {
	levels := make([]int, depth+1)
	for i := range levels {
		levels[i] = i
	}
	return levels
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.InChannels == 0 {
		c.InChannels = 3
	}
	if c.Classes == 0 {
		c.Classes = 2
	}
	if c.Base == 0 {
		c.Base = 16
	}
	if c.Depth == 0 {
		c.Depth = 4
	}
	if c.Up == "" {
		c.Up = UpBilinear
	}
	if c.Norm == "" {
		c.Norm = NormBatch
	}
	if c.Groups == 0 {
		c.Groups = 8
	}
	return c
}

// Validate reports the first invalid key of the model section, naming it
// and what is allowed.
func (c Arch) Validate() error {
	switch {
	case c.InChannels < 1:
		return fmt.Errorf("model.in_channels: %d: must be at least 1", c.InChannels)
	case c.Classes < 2 || c.Classes > 255:
		return fmt.Errorf("model.classes: %d: must be between 2 and 255", c.Classes)
	case c.Base < 1 || c.Base > MaxBase:
		return fmt.Errorf("model.base: %d: must be between 1 and %d", c.Base, MaxBase)
	case c.Depth < 1 || c.Depth > 8:
		return fmt.Errorf("model.depth: %d: must be between 1 and 8", c.Depth)
	case c.Up != UpBilinear && c.Up != UpTranspose:
		return fmt.Errorf("model.up: %q: must be %q or %q", c.Up, UpBilinear, UpTranspose)
	case c.Norm != NormBatch && c.Norm != NormGroup && c.Norm != NormNone:
		return fmt.Errorf("model.norm: %q: must be %q, %q or %q", c.Norm, NormBatch, NormGroup, NormNone)
	case c.Norm == NormGroup && c.Groups < 1:
		return fmt.Errorf("model.groups: %d: must be at least 1", c.Groups)
	}
	switch {
	case c.Dims != 0 && c.Dims != 2 && c.Dims != 3:
		return fmt.Errorf("model.dims: %d: must be 2 (images) or 3 (volumes)", c.Dims)
	case c.MaxChannels < 0:
		return fmt.Errorf("model.max_channels: %d: must be 0 (no cap) or a width", c.MaxChannels)
	case len(c.PoolKernels) != 0 && !c.Volumes():
		return fmt.Errorf("model.pool_kernels: %v: model.dims is 2 (images), which pool 2x2 at every level; leave model.pool_kernels out, or set model.dims: 3", c.PoolKernels)
	case len(c.PoolKernels) != 0 && len(c.PoolKernels) != c.Depth:
		return fmt.Errorf("model.pool_kernels: %d kernels: a 3D UNet takes one per level below the first (model.depth = %d)", len(c.PoolKernels), c.Depth)
	}
	for _, k := range c.PoolKernels {
		if (k[0] != 1 && k[0] != 2) || k[1] != 2 || k[2] != 2 {
			return fmt.Errorf("model.pool_kernels: %v: each kernel is [1 or 2, 2, 2] (depth, height, width)", k)
		}
	}
	if c.Norm == NormGroup {
		for i := 0; i <= c.Depth; i++ {
			if w := c.Width(i); w%min(c.Groups, w) != 0 {
				return fmt.Errorf("model.groups: %d does not divide the width %d of level %d; use a power of two", c.Groups, w, i)
			}
		}
	}
	return nil
}
