package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/memunet/memunet/model"
	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration of a run.
type Config struct {
	Model  Model  `yaml:"model"`
	Data   Data   `yaml:"data"`
	Train  Train  `yaml:"train"`
	Memory Memory `yaml:"memory"`
	Output Output `yaml:"output"`
}

// Model is the UNet's architecture (see model.Config).
type Model struct {
	InChannels int    `yaml:"in_channels"`
	Classes    int    `yaml:"classes"`
	Base       int    `yaml:"base"`
	Depth      int    `yaml:"depth"`
	Up         string `yaml:"up"`
	Norm       string `yaml:"norm"`
	Groups     int    `yaml:"groups"`
	Seed       uint64 `yaml:"seed"`
}

// Data says where samples come from.
type Data struct {
	Source      string  `yaml:"source"`
	Count       int     `yaml:"count"`
	Size        int     `yaml:"size"`
	Noise       float64 `yaml:"noise"`
	Seed        uint64  `yaml:"seed"`
	ValFraction float64 `yaml:"val_fraction"`
}

// Train is the optimization.
type Train struct {
	BatchSize   int       `yaml:"batch_size"`
	Steps       int       `yaml:"steps"`
	Epochs      int       `yaml:"epochs"`
	LR          float64   `yaml:"lr"`
	Betas       []float64 `yaml:"betas"`
	Eps         float64   `yaml:"eps"`
	WeightDecay float64   `yaml:"weight_decay"`
	Seed        uint64    `yaml:"seed"`
	ValEvery    int       `yaml:"val_every"`
}

// Memory configures the accounted pool.
type Memory struct {
	Capacity ByteSize `yaml:"capacity"`
	Timeline bool     `yaml:"timeline"`
}

// Output says where and how results are written.
type Output struct {
	Dir      string `yaml:"dir"`
	Progress string `yaml:"progress"`
	LogEvery int    `yaml:"log_every"`
}

// Default is the configuration every file starts from: the quickstart run on
// the built-in synthetic shapes.
func Default() Config {
	return Config{
		Model:  Model{InChannels: 3, Classes: 4, Base: 8, Depth: 3, Up: "bilinear", Norm: "batch", Groups: 8, Seed: 1},
		Data:   Data{Source: "synthetic", Count: 512, Size: 32, Noise: 0.1, Seed: 1, ValFraction: 0.125},
		Train:  Train{BatchSize: 8, Steps: 600, LR: 3e-3, Betas: []float64{0.9, 0.999}, Eps: 1e-8, Seed: 1, ValEvery: 200},
		Memory: Memory{},
		Output: Output{Progress: "auto", LogEvery: 10},
	}
}

// ModelConfig is the model section as the model package takes it.
func (c Config) ModelConfig() model.Config {
	return model.Config{
		InChannels: c.Model.InChannels, Classes: c.Model.Classes, Base: c.Model.Base, Depth: c.Model.Depth,
		Up: model.UpMode(c.Model.Up), Norm: model.NormKind(c.Model.Norm), Groups: c.Model.Groups,
	}
}

// Validate reports the first invalid value, naming its key, the value and what
// is allowed.
func (c Config) Validate() error {
	// The widest level has base * 2^depth channels (depth is at most 8); a base
	// so large that this overflows makes model.Config.Validate divide by zero.
	if err := c.ModelConfig().Validate(); err != nil {
		return err
	}
	d, t := c.Data, c.Train
	switch {
	case d.Source != "synthetic":
		return fmt.Errorf("data.source: %q: must be \"synthetic\" (the built-in shapes)", d.Source)
	case d.Count < 2:
		return fmt.Errorf("data.count: %d: need at least 2 samples (one to train, one to validate)", d.Count)
	case d.Size < 1:
		return fmt.Errorf("data.size: %d: must be a positive image size in pixels", d.Size)
	case d.Size%(1<<c.Model.Depth) != 0 || d.Size < 1<<c.Model.Depth:
		f := 1 << c.Model.Depth
		return fmt.Errorf("data.size: %d is not divisible by 2^model.depth = %d; use a multiple of %d (e.g. %d) or a smaller model.depth",
			d.Size, f, f, max(f, (d.Size+f-1)/f*f))
	case !(d.Noise >= 0 && d.Noise <= 1): // also rejects NaN
		return fmt.Errorf("data.noise: %g: must be between 0 and 1", d.Noise)
	case !(d.ValFraction > 0 && d.ValFraction < 1):
		return fmt.Errorf("data.val_fraction: %g: must be between 0 and 1 (exclusive)", d.ValFraction)
	case c.Data.Source == "synthetic" && c.Model.InChannels != 3:
		return fmt.Errorf("model.in_channels: %d: the synthetic data has 3 channels (RGB)", c.Model.InChannels)
	case c.Data.Source == "synthetic" && c.Model.Classes > 4:
		return fmt.Errorf("model.classes: %d: the synthetic data has at most 4 classes (background, circle, rectangle, triangle)", c.Model.Classes)
	case t.BatchSize < 1:
		return fmt.Errorf("train.batch_size: %d: must be at least 1", t.BatchSize)
	case t.Steps < 0:
		return fmt.Errorf("train.steps: %d: must be 0 (use train.epochs) or more", t.Steps)
	case t.Epochs < 0:
		return fmt.Errorf("train.epochs: %d: must be 0 (use train.steps) or more", t.Epochs)
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
	case t.ValEvery < 0:
		return fmt.Errorf("train.val_every: %d: must be 0 (only at the end) or more", t.ValEvery)
	case c.Memory.Capacity < 0:
		return fmt.Errorf("memory.capacity: %d: must be 0 (unlimited) or a size such as 6GiB", c.Memory.Capacity)
	case c.Output.Progress != "auto" && c.Output.Progress != "bar" && c.Output.Progress != "plain" && c.Output.Progress != "none":
		return fmt.Errorf("output.progress: %q: must be auto, bar, plain or none", c.Output.Progress)
	case c.Output.LogEvery < 1:
		return fmt.Errorf("output.log_every: %d: must be at least 1", c.Output.LogEvery)
	}
	valCount := int(float64(d.Count) * d.ValFraction)
	if valCount < 1 || d.Count-valCount < 1 {
		return fmt.Errorf("data.val_fraction: %g of data.count %d leaves %d validation and %d training samples; both need at least 1",
			d.ValFraction, d.Count, valCount, d.Count-valCount)
	}
	return nil
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

// ParseByteSize parses "6GiB", "512 MiB", "1.5GB", "1048576".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1<<62 || v != v {
		return 0, fmt.Errorf("%q is not a size: write a number of bytes or one with a unit, such as 6GiB or 512MiB", s)
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

// MarshalYAML writes the size in the largest binary unit that divides it.
func (b ByteSize) MarshalYAML() (any, error) {
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
