package data

import (
	"fmt"
	"math"
	"strings"

	"github.com/memunet/memunet/internal/yamlvalue"
)

// Sources of samples (config key data.source).
const (
	SourceSynthetic = "synthetic"
	SourceFolder    = "folder"
	SourceVOC       = "voc"
)

// Config is the config's data section (keys data.*) as the YAML decodes
// it: where samples come from and how they are prepared. Package config
// holds it as its Data; SourceConfig adds what the data needs to know of
// the model, and its Validate is the one check of every key here.
type Config struct {
	// Source is synthetic, folder (Path/images + Path/masks), nifti (the
	// same with .nii[.gz] volumes, read as slices) or voc (a VOCdevkit
	// root).
	Source string `yaml:"source"`
	// Path is the dataset root of folder, nifti and voc.
	Path string `yaml:"path"`
	// MaskSuffix ends every mask's file stem (folder): image STEM.jpg has
	// mask STEM+MaskSuffix.png, e.g. "_mask" for Carvana.
	MaskSuffix string `yaml:"mask_suffix"`
	// MaskValues maps raw mask values (palette indices or gray levels,
	// 0..MaxMaskValue: 16-bit gray masks are read by value) to classes:
	// MaskValues[k] is class k. Empty: folder discovers them by a
	// scan of every mask (sorted ascending); voc takes the values as class
	// indices. In voc masks, 255 is the ignore index unless listed.
	MaskValues yamlvalue.IntList `yaml:"mask_values"`
	// Labels maps raw mask values to classes where they merge or are
	// ignored (see Labels); exclusive with MaskValues.
	Labels Labels `yaml:"labels"`
	// Background is the background class (0 by default; NoBackground for
	// none): skip_empty, foreground patches and the means without it.
	Background Background `yaml:"background"`
	// ClassNames names classes 0, 1, ... in legends, tables and exports
	// (empty: "class 0", "class 1", ...).
	ClassNames yamlvalue.NameList `yaml:"class_names"`
	// Count, Size and Noise describe the synthetic set (SyntheticConfig).
	Count int     `yaml:"count"`
	Size  int     `yaml:"size"`
	Noise float64 `yaml:"noise"`
	// Seed seeds the synthetic samples and the split; ValFraction is the
	// share of samples that validate (voc with a val.txt and folder's
	// train/ val/ subfolders use their lists instead).
	Seed        uint64  `yaml:"seed"`
	ValFraction float64 `yaml:"val_fraction"`
	// Split is how samples divide into training and validation: auto (the
	// source's way: folder's train/ val/ folders or random by file, voc's
	// lists, nifti by volume, synthetic by sample) or slices (nifti 2D:
	// each volume's slices, a contiguous block of ValFraction of them
	// validating, the slice on each side of it left out, so that no
	// training slice neighbours a validation one; a set of one volume
	// trains).
	Split string `yaml:"split"`
	// Folds, where not 0, cuts the samples that split at random (synthetic
	// samples, a flat folder's files or a folder set's train/ where it has
	// no val/, voc without val.txt, nifti volumes) into Folds folds by Seed
	// (see Folds): fold Fold validates, the others train, instead of
	// ValFraction. A set with a validation split of its own refuses it.
	Folds int `yaml:"folds"`
	Fold  int `yaml:"fold"`
	// Resize is [H, W] to scale every sample to (bilinear; masks nearest),
	// or empty.
	Resize []int `yaml:"resize"`
	// Scale multiplies each side by this factor (rounded), 0 for none;
	// exclusive with Resize.
	Scale float64 `yaml:"scale"`
	// Patch is [H, W] to train on random crops of that size at full
	// resolution (after Resize or Scale, if set), or empty; PatchForeground
	// is the share of them centred on a foreground pixel (see patches).
	Patch           []int   `yaml:"patch"`
	PatchForeground float64 `yaml:"patch_foreground"`
	// Mean and Std normalize each channel of a raw intensity v in [0, 1] as
	// (v-Mean[c])/Std[c]; one value applies to every channel; empty means
	// the package's Mean and Std.
	Mean yamlvalue.FloatList `yaml:"mean"`
	Std  yamlvalue.FloatList `yaml:"std"`
	// Flip mirrors training samples left-right at random (seeded by
	// train.seed).
	Flip bool `yaml:"flip"`
	// Augment is the rest of the training augmentation.
	Augment Augment `yaml:"augment"`
	// NIfTI is how data.source nifti slices its volumes.
	NIfTI NIfTIConfig `yaml:"nifti"`
}

// SourceConfig is the data section with what it needs to know of the
// model, as Open takes it (config.Config.DataConfig derives one). Its
// Validate is the one check of data.*: Open and the other constructors
// trust a SourceConfig, as they trust a loaded config.
type SourceConfig struct {
	Config
	// Channels is the image channels the model takes: 1 (gray) or 3 (RGB)
	// for files; 3 for synthetic.
	Channels int
	// Classes is the number of classes, background included.
	Classes int
	// SizeMultiple is what the final height and width must be multiples of
	// (2^model.depth); 0 or 1 for any.
	SizeMultiple int
	// Dims is model.dims: 3 makes the samples volumes (see Volumes), whose
	// depth must be a multiple of DepthMultiple (the product of the
	// poolings' depth factors; 0 or 1 for any).
	Dims, DepthMultiple int
	// MaxPixels bounds each file (0: MaxImagePixels).
	MaxPixels int
	// DecodeBytes bounds what concurrent decodes of the dataset hold (0:
	// DefaultDecodeBytes).
	DecodeBytes int64
}

// Ways to split (data.split).
const (
	SplitAuto   = "auto"
	SplitSlices = "slices"
)

// MaxFolds bounds data.folds.
const MaxFolds = 1000

// RandomSplit divides n samples that have no split of their own into
// training and validation: fold Fold of Folds where Folds is set, else
// ValFraction of them at random; both by Seed.
func (c Config) RandomSplit(n int) (train, val []int) {
	if c.Folds > 0 {
		return Folds(n, c.Folds, c.Fold, c.Seed)
	}
	return Split(n, c.ValFraction, c.Seed)
}

// validateFolds checks data.folds and data.fold.
func (cfg SourceConfig) validateFolds() error {
	switch {
	case cfg.Folds < 0 || cfg.Folds == 1 || cfg.Folds > MaxFolds:
		return fmt.Errorf("data.folds: %d: 0 (no cross-validation) or the number of folds, 2 to %d, e.g. 5", cfg.Folds, MaxFolds)
	case cfg.Folds == 0 && cfg.Fold != 0:
		return fmt.Errorf("data.fold: %d: data.folds is 0 (no cross-validation); set data.folds to the number of folds, or leave data.fold out", cfg.Fold)
	case cfg.Fold < 0 || cfg.Folds > 0 && cfg.Fold >= cfg.Folds:
		return fmt.Errorf("data.fold: %d: the fold that validates, 0 to %d (data.folds %d)", cfg.Fold, max(cfg.Folds-1, 0), cfg.Folds)
	case cfg.Folds > 0 && cfg.Split == SplitSlices:
		return fmt.Errorf("data.folds: %d: data.split is slices, which validates on a block of every volume's slices; cross-validation folds whole volumes: use data.split: auto, or leave data.folds out", cfg.Folds)
	case cfg.Folds > 0 && cfg.Source == SourceSynthetic && cfg.Folds > cfg.Count:
		return fmt.Errorf("data.folds: %d: more folds than data.count's %d samples; every fold needs a sample to validate: use at most %d folds, or raise data.count", cfg.Folds, cfg.Count, cfg.Count)
	}
	return nil
}

// foldsRefused is, where data.folds is set, the fatal problem of a set
// whose validation samples are its own (what: where, at file), with what
// to do instead (nil where data.folds is not set).
func (cfg SourceConfig) foldsRefused(file, what, instead string) []Problem {
	if cfg.Folds == 0 {
		return nil
	}
	return []Problem{fatal(file, "data.folds: %d: the set validates on %s, a split of its own, and cross-validation folds the samples that split at random; leave data.folds out, or %s",
		cfg.Folds, what, instead)}
}

// Synthetic is the built-in set the section describes, with the model's
// classes.
func (cfg SourceConfig) Synthetic() SyntheticConfig {
	c := SyntheticConfig{Count: cfg.Count, Size: cfg.Size, Classes: cfg.Classes, Seed: cfg.Seed, Noise: cfg.Noise}
	if cfg.Volumes() {
		c.Depth = cfg.Size
	}
	return c
}

// Volumes reports model.dims 3: samples are volumes.
func (cfg SourceConfig) Volumes() bool { return cfg.Dims == 3 }

// Validate reports the first invalid setting of the data section, naming its
// config key, the value and what is allowed: the one check of data.*,
// which the config package makes when a config is loaded.
func (cfg SourceConfig) Validate() error {
	switch cfg.Source {
	case SourceSynthetic:
		switch s := cfg.Synthetic(); {
		case cfg.Channels != SyntheticChannels:
			return fmt.Errorf("model.in_channels: %d: the synthetic data has %d channels (RGB)", cfg.Channels, SyntheticChannels)
		case cfg.Classes > MaxSyntheticClasses:
			return fmt.Errorf("model.classes: %d: the synthetic data has at most %d classes (background, circle, rectangle, triangle)", cfg.Classes, MaxSyntheticClasses)
		case cfg.Path != "":
			return fmt.Errorf("data.path: %q is set but data.source is synthetic (the built-in shapes), which reads no files; set data.source: folder (DIR/images/ and DIR/masks/) or voc to train on it, or leave data.path out", cfg.Path)
		case s.Count < 2:
			return fmt.Errorf("data.count: %d: need at least 2 samples (one to train, one to validate)", s.Count)
		case s.Size < 1:
			return fmt.Errorf("data.size: %d: must be a positive image size in pixels", s.Size)
		}
	case SourceFolder, SourceVOC:
		if cfg.Path == "" {
			what := "a folder with images/ and masks/ (matched by file name)"
			if cfg.Source == SourceVOC {
				what = "a VOC root such as VOCdevkit/VOC2012 (JPEGImages/, SegmentationClass/, ImageSets/Segmentation/)"
			}
			return fmt.Errorf("data.path: empty: data.source %s reads %s; set data.path", cfg.Source, what)
		}
		if cfg.Channels != 1 && cfg.Channels != 3 {
			return fmt.Errorf("model.in_channels: %d: images are read as gray (1) or RGB (3)", cfg.Channels)
		}
	case SourceNIfTI:
		switch {
		case cfg.Path == "":
			return fmt.Errorf("data.path: empty: data.source nifti reads DIR/images/*.nii[.gz] and DIR/masks/*.nii[.gz]; set data.path")
		case cfg.Channels < 1:
			return fmt.Errorf("model.in_channels: %d: a NIfTI case gives one channel per modality (NAME_0000.nii.gz, NAME_0001.nii.gz, ...); set model.in_channels to their number", cfg.Channels)
		}
		if err := cfg.NIfTI.validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("data.source: %q: must be \"synthetic\" (the built-in shapes), \"folder\" (data.path with images/ and masks/), \"voc\" (a VOCdevkit root) or \"nifti\" (data.path with images/ and masks/ of .nii or .nii.gz volumes)", cfg.Source)
	}
	if cfg.Classes < 2 || cfg.Classes > MaxClasses {
		return fmt.Errorf("model.classes: %d: must be between 2 and %d", cfg.Classes, MaxClasses)
	}
	if err := ValidateMaskValues(cfg.MaskValues, cfg.Classes); err != nil {
		return err
	}
	switch cfg.Split {
	case "", SplitAuto:
	case SplitSlices:
		if cfg.Source != SourceNIfTI || cfg.Volumes() {
			return fmt.Errorf("data.split: slices divides the slices of NIfTI volumes read as 2D slices (data.source nifti, model.dims 2); use data.split: auto")
		}
	default:
		return fmt.Errorf("data.split: %q: must be %q (the source's way) or %q (nifti: contiguous blocks of each volume's slices)", cfg.Split, SplitAuto, SplitSlices)
	}
	if err := cfg.Labels.validate(cfg.Classes, cfg.MaskValues); err != nil {
		return err
	}
	switch {
	case cfg.Source == SourceSynthetic && len(cfg.Labels) > 0:
		return fmt.Errorf("data.labels: the synthetic masks hold class indices already; leave data.labels out")
	case cfg.Background != NoBackground && (cfg.Background < 0 || int(cfg.Background) >= cfg.Classes):
		return fmt.Errorf("data.background: %d: the background is a class, 0..%d (model.classes %d), or none", cfg.Background, cfg.Classes-1, cfg.Classes)
	}
	if err := ValidateNorm(cfg.Mean, cfg.Std, cfg.Channels); err != nil {
		return err
	}
	if cfg.Source == SourceNIfTI && cfg.NIfTI.Normalize == NormalizeZScore && !defaultNorm(cfg.Mean, cfg.Std) {
		return fmt.Errorf("data.mean, data.std: %v, %v: data.nifti.normalize is zscore, which normalizes each volume by its own mean and std; leave data.mean and data.std out", cfg.Mean, cfg.Std)
	}
	if err := validateClassNames(cfg.ClassNames, cfg.Classes); err != nil {
		return err
	}
	if err := cfg.Augment.Validate(0, 0, cfg.Volumes()); err != nil {
		return err
	}
	if err := cfg.validateVolumes(); err != nil {
		return err
	}
	if err := cfg.validateSize(); err != nil {
		return err
	}
	if cfg.Source == SourceSynthetic {
		if err := cfg.Synthetic().Validate(); err != nil {
			return err
		}
	}
	if !(cfg.ValFraction > 0 && cfg.ValFraction < 1) {
		return fmt.Errorf("data.val_fraction: %g: must be between 0 and 1 (exclusive)", cfg.ValFraction)
	}
	if err := cfg.validateFolds(); err != nil {
		return err
	}
	if s := cfg.Synthetic(); cfg.Source == SourceSynthetic && cfg.Folds == 0 {
		if val := int(float64(s.Count) * cfg.ValFraction); val < 1 || s.Count-val < 1 {
			return fmt.Errorf("data.val_fraction: %g of data.count %d leaves %d validation and %d training samples; both need at least 1",
				cfg.ValFraction, s.Count, val, s.Count-val)
		}
	}
	return nil
}

// validateVolumes checks what model.dims 3 asks of the data section:
// volumes to read, and none of the 2D-only preparations.
func (cfg SourceConfig) validateVolumes() error {
	if !cfg.Volumes() {
		return nil
	}
	const why = "model.dims is 3 (volumes)"
	fd, fh := max(cfg.DepthMultiple, 1), max(cfg.SizeMultiple, 1)
	switch p := cfg.Patch; {
	case cfg.Source != SourceSynthetic && cfg.Source != SourceNIfTI:
		return fmt.Errorf("data.source: %s: %s, which train from data.source synthetic (built-in) or nifti (.nii[.gz] volumes); set one of them or model.dims: 2", cfg.Source, why)
	case len(cfg.Resize) != 0:
		return fmt.Errorf("data.resize: %v: %s, whose samples are not resized; leave data.resize out", cfg.Resize, why)
	case cfg.Scale != 0 && cfg.Scale != 1:
		return fmt.Errorf("data.scale: %g: %s, whose samples are not scaled; leave data.scale out", cfg.Scale, why)
	case cfg.Source == SourceSynthetic && len(p) != 0:
		return fmt.Errorf("data.patch: %v: %s, and synthetic volumes are trained whole; leave data.patch out and set data.size", p, why)
	case cfg.Source == SourceSynthetic && cfg.Size%fd != 0:
		return fmt.Errorf("data.size: %d: a synthetic volume's depth must be divisible by the poolings' depth factors (%d, from model.depth and model.pool_kernels); use a multiple of %d",
			cfg.Size, fd, fd)
	case len(p) != 0 && (len(p) != 3 || min(p[0], p[1], p[2]) < 1 || max(p[0], p[1], p[2]) > MaxVolumePatch):
		return fmt.Errorf("data.patch: %v: %s: want [D, H, W] (along z, y, x) with sides from 1 to %d, e.g. [64, 64, 64], or left out to train on whole volumes", p, why, MaxVolumePatch)
	case len(p) == 3 && (p[0]%fd != 0 || p[1]%fh != 0 || p[2]%fh != 0):
		return fmt.Errorf("data.patch: %v is not divisible by the poolings' %dx%dx%d (model.depth, model.pool_kernels); use multiples, e.g. [%d, %d, %d]",
			p, fd, fh, fh, max(fd, (p[0]+fd-1)/fd*fd), max(fh, (p[1]+fh-1)/fh*fh), max(fh, (p[2]+fh-1)/fh*fh))
	case cfg.Source == SourceNIfTI && cfg.NIfTI.Axis != 2:
		return fmt.Errorf("data.nifti.axis: %d: %s, read whole with D along z; leave data.nifti.axis at 2", cfg.NIfTI.Axis, why)
	case cfg.Source == SourceNIfTI && cfg.NIfTI.SkipEmpty:
		return fmt.Errorf("data.nifti.skip_empty: %s, which are not sliced; data.patch_foreground samples patches around foreground instead", why)
	case !(cfg.PatchForeground >= 0 && cfg.PatchForeground <= 1):
		return fmt.Errorf("data.patch_foreground: %g: the share of patches centred on foreground must be in [0, 1], e.g. 0.33 (nnU-Net's)", cfg.PatchForeground)
	}
	return nil
}

// MaxVolumePatch bounds a side of a 3D data.patch.
const MaxVolumePatch = 1024

// validateClassNames checks data.class_names: none, or one distinct,
// non-empty name per class.
func validateClassNames(names []string, classes int) error {
	if len(names) == 0 {
		return nil
	}
	if len(names) != classes {
		return fmt.Errorf("data.class_names: %d names but model.classes is %d; give one name per class (the k-th names class k), e.g. [background, car]",
			len(names), classes)
	}
	seen := map[string]int{}
	for k, n := range names {
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("data.class_names: the name of class %d is empty; give every class a name", k)
		}
		if j, ok := seen[n]; ok {
			return fmt.Errorf("data.class_names: %q names classes %d and %d; give each class its own name", n, j, k)
		}
		seen[n] = k
	}
	return nil
}

// validateSize checks data.resize and data.scale, and that the size the
// samples end up with is a multiple of SizeMultiple where it is known before
// reading files (resize, or the synthetic size).
func (cfg SourceConfig) validateSize() error {
	f := max(cfg.SizeMultiple, 1)
	if r := cfg.Resize; len(r) != 0 {
		if len(r) != 2 || r[0] < 1 || r[1] < 1 || r[0] > MaxResizeSize || r[1] > MaxResizeSize {
			return fmt.Errorf("data.resize: %v: must be [H, W] with sizes from 1 to %d, e.g. [64, 64], or left out", r, MaxResizeSize)
		}
		if r[0]%f != 0 || r[1]%f != 0 {
			return fmt.Errorf("data.resize: %v is not divisible by 2^model.depth = %d; use multiples of %d (e.g. [%d, %d]) or a smaller model.depth",
				r, f, f, max(f, (r[0]+f-1)/f*f), max(f, (r[1]+f-1)/f*f))
		}
	}
	if err := ValidateScale(cfg.Scale, len(cfg.Resize) != 0); err != nil {
		return err
	}
	if err := validatePatch(cfg.Patch, cfg.PatchForeground, f); err != nil && !cfg.Volumes() { // validateVolumes checks a 3D patch
		return err
	}
	if s := cfg.Size; cfg.Source == SourceSynthetic && len(cfg.Resize) == 0 {
		if cfg.Scale == 0 || cfg.Scale == 1 {
			if s%f != 0 || s < f {
				return fmt.Errorf("data.size: %d is not divisible by 2^model.depth = %d; use a multiple of %d (e.g. %d) or a smaller model.depth",
					s, f, f, max(f, (s+f-1)/f*f))
			}
		} else if h := max(1, int(math.Round(float64(s)*cfg.Scale))); h%f != 0 {
			return fmt.Errorf("data.scale: %g of data.size %d gives %d, not divisible by 2^model.depth = %d; use data.resize: [%d, %d] or another scale",
				cfg.Scale, s, h, f, max(f, (h+f/2)/f*f), max(f, (h+f/2)/f*f))
		}
	}
	return nil
}

// MaxScale bounds data.scale.
const MaxScale = 16

// ValidateScale checks data.scale (0 for none); it cannot be combined with
// data.resize.
func ValidateScale(s float64, resize bool) error {
	switch {
	case !(s >= 0 && s <= MaxScale):
		return fmt.Errorf("data.scale: %g: must be a factor above 0 and at most %d, e.g. 0.5, or 0 for none", s, MaxScale)
	case s > 0 && s != 1 && resize:
		return fmt.Errorf("data.scale: %g and data.resize are both set: set only one", s)
	}
	return nil
}

// ValidateMaskValues checks data.mask_values: distinct values
// 0..MaxMaskValue (65535: 16-bit gray masks are read by value), one per
// class (classes of them), or none.
func ValidateMaskValues(vals []int, classes int) error {
	if len(vals) == 0 {
		return nil
	}
	seen := map[int]bool{}
	for _, v := range vals {
		if v < 0 || v > MaxMaskValue {
			return fmt.Errorf("data.mask_values: %d: mask values are palette indices or gray levels from 0 to %d (0 to 255 in 8-bit masks, 0 to 65535 in 16-bit gray masks)", v, MaxMaskValue)
		}
		if seen[v] {
			return fmt.Errorf("data.mask_values: %d is listed twice", v)
		}
		seen[v] = true
	}
	if len(vals) != classes {
		return fmt.Errorf("data.mask_values: %v lists %d values but model.classes is %d; list one mask value per class (the k-th value is class k)",
			vals, len(vals), classes)
	}
	return nil
}

// ValidateNorm checks data.mean and data.std: empty, or one value or one
// per channel; std positive; all finite.
func ValidateNorm(mean, std []float64, channels int) error {
	for _, kv := range []struct {
		key  string
		vals []float64
	}{{"data.mean", mean}, {"data.std", std}} {
		if n := len(kv.vals); n != 0 && n != 1 && n != channels {
			return fmt.Errorf("%s: %v: give one value for every channel or one per channel (%d)", kv.key, kv.vals, channels)
		}
		for _, v := range kv.vals {
			if math.IsNaN(v) || math.IsInf(v, 0) || (kv.key == "data.std" && !(v > 0)) || math.Abs(v) > 1e6 {
				if kv.key == "data.std" {
					return fmt.Errorf("data.std: %v: must be positive finite numbers, e.g. [0.229, 0.224, 0.225]", kv.vals)
				}
				return fmt.Errorf("data.mean: %v: must be finite numbers, e.g. [0.485, 0.456, 0.406]", kv.vals)
			}
		}
	}
	return nil
}

func defaultNorm(mean, std []float64) bool {
	for _, v := range mean {
		if v != Mean {
			return false
		}
	}
	for _, v := range std {
		if v != Std {
			return false
		}
	}
	return true
}
