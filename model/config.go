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
	// layers wide enough to gain from it).
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
	if c.Norm == NormGroup {
		for i := 0; i <= c.Depth; i++ {
			if w := c.Base << i; w%min(c.Groups, w) != 0 {
				return fmt.Errorf("model.groups: %d does not divide the width %d of level %d; use a power of two", c.Groups, w, i)
			}
		}
	}
	return nil
}
