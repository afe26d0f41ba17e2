package data

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
)

// Set is an opened dataset: every sample at its final size, normalized,
// and which of them train and which validate.
type Set struct {
	Data       Dataset
	Train, Val []int
	// Test are the test samples (a folder set's test/ subfolder), if any.
	Test   []int
	Report *Report

	stamps      []stamp // the files and folders read (file sources)
	fingerprint Fingerprint
	// whole is what a data.patch set cuts its patches from (the source and
	// its resized size), so another patch size is cut without reading the
	// files again (repatch).
	whole *wholeImages
}

// Open reads the dataset cfg describes and checks every file in full: an
// unreadable or truncated file, a mask of another size than its image, a
// mask value that is no class, an image without a mask or an empty dataset
// is an error naming the file, before any training starts.
func Open(cfg SourceConfig) (*Set, error) {
	return OpenContext(context.Background(), cfg)
}

// OpenContext is Open that stops, with ctx's error, once ctx is done (a
// signal during a long scan).
func OpenContext(ctx context.Context, cfg SourceConfig) (*Set, error) {
	set, rep, err := open(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	if err := rep.Err(); err != nil {
		return nil, err
	}
	return set, nil
}

// Check is Open that reports instead of failing: the returned report lists
// every problem. The error is for a configuration that cannot be checked
// at all. For the synthetic set it also counts the classes of every sample.
func Check(cfg SourceConfig) (*Report, error) {
	return CheckContext(context.Background(), cfg)
}

// CheckContext is Check that stops, with ctx's error, once ctx is done.
func CheckContext(ctx context.Context, cfg SourceConfig) (*Report, error) {
	_, rep, err := open(ctx, cfg, true)
	return rep, err
}

func open(ctx context.Context, cfg SourceConfig, full bool) (*Set, *Report, error) {
	if cfg.MaxPixels <= 0 {
		cfg.MaxPixels = MaxImagePixels
	}
	rep := &Report{Source: cfg.Source, Path: cfg.Path, MaskSuffix: cfg.MaskSuffix, Channels: cfg.Channels, Classes: cfg.Classes, Background: cfg.Background,
		Mapping: make([]int16, MaxMaskValue+1)}
	for v := range rep.Mapping {
		rep.Mapping[v] = -1
	}
	kind, ok := sourceOf(cfg.Source)
	if !ok {
		return nil, nil, fmt.Errorf("data.source: %q: must be synthetic, folder, voc or nifti", cfg.Source)
	}
	fd, err := kind.open(ctx, cfg, rep, full)
	if err != nil {
		return nil, nil, err
	}
	if fd.src == nil { // rep says why
		return nil, rep, nil
	}
	src, split, stamps, testIdx := fd.src, fd.split, fd.stamps, fd.test
	if split == nil {
		split = func(n int) ([]int, []int) { return cfg.RandomSplit(n) }
	}
	rep.Samples = src.Len()
	if rep.Samples < 2 {
		if !hasFatal(rep.Problems) {
			rep.Problems = append(rep.Problems, fatal(cfg.Path, "has %d usable sample(s); training needs at least 2 (one to train, one to validate)", rep.Samples))
		}
		return nil, rep, nil
	}
	train, val := split(src.Len())
	rep.Train, rep.Val = len(train), len(val)
	if cfg.Folds > 0 {
		rep.Folds, rep.Fold = cfg.Folds, cfg.Fold
	}
	if n := len(train) + len(val); cfg.Folds > n && cfg.Source != SourceNIfTI { // openNIfTI counts volumes
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "data.folds: %d: the set has %d samples to fold, fewer than the folds, and every fold validates at least one; use at most %d folds", cfg.Folds, n, n))
		return nil, rep, nil
	}
	if len(val) == 0 || len(train) == 0 {
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "the split leaves %d training and %d validation samples; both need at least 1 (data.val_fraction)", len(train), len(val)))
		return nil, rep, nil
	}

	// Final size.
	var ds Dataset = src
	h, w := src.Size()
	switch {
	case len(cfg.Resize) == 2:
		h, w = cfg.Resize[0], cfg.Resize[1]
		rep.Resized = fmt.Sprintf("data.resize [%d, %d]", h, w)
	case cfg.Scale > 0 && cfg.Scale != 1 && h > 0:
		h, w = max(1, int(math.Round(float64(h)*cfg.Scale))), max(1, int(math.Round(float64(w)*cfg.Scale)))
		rep.Resized = fmt.Sprintf("data.scale %g", cfg.Scale)
	}
	newSet := func(ds Dataset, h, w int) *Set {
		return &Set{Data: ds, Train: train, Val: val, Test: testIdx, Report: rep, stamps: stamps,
			fingerprint: Fingerprint{Samples: ds.Len(), Train: len(train), Val: len(val), Height: h, Width: w, Files: fd.files, Contents: fd.contents}}
	}
	if len(cfg.Patch) == 2 {
		p, err := openPatches(cfg, src, h, w, rep)
		if p == nil {
			return nil, rep, err
		}
		set := newSet(p, cfg.Patch[0], cfg.Patch[1])
		set.whole = &wholeImages{src: src, h: h, w: w}
		return set, rep, nil
	}
	if h == 0 { // differing sizes: reported by scanFiles
		return nil, rep, nil
	}
	rep.Height, rep.Width = h, w
	if cfg.Volumes() {
		rep.Depth = DepthOf(src)
	}
	if f := cfg.SizeMultiple; f > 1 && (h%f != 0 || w%f != 0) {
		how := "the images are"
		if rep.Resized != "" {
			how = "after " + rep.Resized + " the images are"
		}
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "%s %dx%d (height x width), not divisible by 2^model.depth = %d; set data.resize: [%d, %d] or lower model.depth",
			how, h, w, f, max(f, roundTo(h, f)), max(f, roundTo(w, f))))
		return nil, rep, nil
	}
	if sh, sw := src.Size(); sh != h || sw != w {
		r, err := Resize(src, h, w)
		if err != nil {
			return nil, nil, err
		}
		ds = r
	}
	if !defaultNorm(cfg.Mean, cfg.Std) {
		n, err := Normalize(ds, cfg.Mean, cfg.Std)
		if err != nil {
			return nil, nil, err
		}
		ds = n
	}
	return newSet(ds, h, w), rep, nil
}

func roundTo(v, f int) int { return (v + f/2) / f * f }

func seq(lo, hi int) []int {
	out := make([]int, 0, max(hi-lo, 0))
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// Normalize returns ds with each channel c normalized as (v-mean[c])/std[c]
// instead of (v-Mean)/Std, v the raw intensity in [0, 1] (config keys
// data.mean and data.std). One value applies to every channel; an empty
// list keeps the package's value.
func Normalize(ds Dataset, mean, std []float64) (Dataset, error) {
	a, b, err := NormCoefficients(mean, std, ds.Channels())
	if err != nil {
		return nil, err
	}
	if a == nil { // the package's own: the identity
		a, b = make([]float32, ds.Channels()), make([]float32, ds.Channels())
		for ch := range a {
			a[ch] = 1
		}
	}
	return &normalized{Dataset: ds, a: a, b: b}, nil
}

type normalized struct {
	Dataset
	a, b []float32
}

func (n *normalized) inner() Dataset { return n.Dataset }

func (n *normalized) Sample(i int, img []float32, mask []uint8) error {
	if err := n.Dataset.Sample(i, img, mask); err != nil {
		return err
	}
	h, w := n.Size()
	plane := h * w
	for ch := range n.a {
		a, b := n.a[ch], n.b[ch]
		dst := img[ch*plane : (ch+1)*plane]
		for k, v := range dst {
			dst[k] = v*a + b
		}
	}
	return nil
}

func (n *normalized) String() string {
	if s, ok := n.Dataset.(fmt.Stringer); ok {
		return s.String() + " (normalized by data.mean, data.std)"
	}
	return "normalized dataset"
}

// stamp is a file's size and modification time when it was opened.
type stamp struct {
	path  string
	size  int64
	mtime int64
}

func stampOf(path string) stamp {
	st, err := os.Stat(path)
	if err != nil {
		return stamp{path: path, size: -1}
	}
	return stamp{path: path, size: st.Size(), mtime: st.ModTime().UnixNano()}
}

// unchanged reports whether every file and folder the set was read from
// still has the size and modification time it had (a file added to or
// removed from a folder changes the folder's time).
func (s *Set) unchanged() bool {
	for _, st := range s.stamps {
		if stampOf(st.path) != st {
			return false
		}
	}
	return true
}

var openCache struct {
	sync.Mutex
	sets map[string]*Set
}

// OpenCached is Open that returns the Set of an earlier call with the same
// config while none of its files or folders has changed size or
// modification time, so that planning several variants of one run reads a
// large dataset once. fresh says the files were read now.
func OpenCached(cfg SourceConfig) (set *Set, fresh bool, err error) {
	return OpenCachedContext(context.Background(), cfg)
}

// OpenCachedContext is OpenCached that stops, with ctx's error, once ctx
// is done.
func OpenCachedContext(ctx context.Context, cfg SourceConfig) (set *Set, fresh bool, err error) {
	if cfg.Source == SourceSynthetic {
		set, err = OpenContext(ctx, cfg)
		return set, true, err
	}
	key := fmt.Sprintf("%#v", cfg)
	whole := cfg
	whole.Patch, whole.PatchForeground = nil, 0
	wholeKey := fmt.Sprintf("patches of %#v", whole) // a data.patch set of any patch size
	openCache.Lock()
	defer openCache.Unlock()
	if s, ok := openCache.sets[key]; ok && s.unchanged() {
		return s, false, nil
	}
	if s, ok := openCache.sets[wholeKey]; ok && len(cfg.Patch) == 2 && s.unchanged() {
		set, err := s.repatch(cfg)
		return set, false, err
	}
	set, err = OpenContext(ctx, cfg)
	if err != nil {
		return nil, true, err
	}
	if openCache.sets == nil || len(openCache.sets) >= 8 {
		openCache.sets = map[string]*Set{}
	}
	openCache.sets[key] = set
	if set.whole != nil {
		openCache.sets[wholeKey] = set
	}
	return set, true, nil
}

// ProbeSize returns the height and width the samples of cfg will have (a
// volume's slices stacked: (D*H, W), as Dataset.Size; see ProbeShape),
// reading as little as it can: data.resize if set; for the synthetic set
// its size; for files the header of the first image. data.scale applies to
// the latter two. It does not check the files (Open does, and requires
// every image to have the first one's size unless data.resize is set);
// an error means the size cannot be told.
func ProbeSize(cfg SourceConfig) (h, w int, err error) {
	if cfg.Volumes() {
		d, h, w, err := ProbeShape(cfg)
		return d * h, w, err
	}
	if p := cfg.Patch; len(p) == 2 {
		return p[0], p[1], nil
	}
	if r := cfg.Resize; len(r) == 2 {
		return r[0], r[1], nil
	}
	switch cfg.Source {
	case SourceSynthetic:
		h, w = cfg.Size, cfg.Size
	case SourceFolder, SourceVOC:
		var pairs []pair
		var probs []Problem
		if cfg.Source == SourceFolder {
			pairs, probs = listFolder(cfg.Path, cfg.MaskSuffix)
		} else {
			pairs, _, _, probs = listVOC(cfg.Path)
		}
		if len(pairs) == 0 {
			if len(probs) > 0 {
				return 0, 0, fmt.Errorf("data: %w", probs[0])
			}
			return 0, 0, fmt.Errorf("data: %s: no samples", cfg.Path)
		}
		max := cfg.MaxPixels
		if max <= 0 {
			max = MaxImagePixels
		}
		im, err := openImageFile(pairs[0].image, max)
		if err != nil {
			return 0, 0, err
		}
		im.Close()
		h, w = im.cfg.Height, im.cfg.Width
	case SourceNIfTI:
		if h, w, err = niftiSliceSize(cfg); err != nil {
			return 0, 0, err
		}
	default:
		return 0, 0, fmt.Errorf("data.source: %q: must be synthetic, folder, voc or nifti", cfg.Source)
	}
	if s := cfg.Scale; s > 0 && s != 1 {
		h, w = max(1, int(math.Round(float64(h)*s))), max(1, int(math.Round(float64(w)*s)))
	}
	return h, w, nil
}

// ProbeShape is ProbeSize's (D, H, W): for volumes (model.dims 3) the
// 3D data.patch, the synthetic cube or the first volume's z, y, x sides;
// for images D is 1.
func ProbeShape(cfg SourceConfig) (d, h, w int, err error) {
	if !cfg.Volumes() {
		h, w, err = ProbeSize(cfg)
		return 1, h, w, err
	}
	switch p := cfg.Patch; {
	case len(p) == 3:
		return p[0], p[1], p[2], nil
	case cfg.Source == SourceSynthetic:
		return cfg.Size, cfg.Size, cfg.Size, nil
	case cfg.Source == SourceNIfTI:
		v, err := firstVolume(cfg)
		if err != nil {
			return 0, 0, 0, err
		}
		return v.Dims[2], v.Dims[1], v.Dims[0], nil
	}
	return 0, 0, 0, fmt.Errorf("data.source: %q: volumes come from synthetic or nifti", cfg.Source)
}

// splitFolders is the train/, val/ and test/ subfolders of a folder set
// laid out by split (root/train/images and root/train/masks at least; val/
// and test/ when present), or nil for the flat layout.
func splitFolders(root string) []string {
	if st, err := os.Stat(filepath.Join(root, "train", "images")); err != nil || !st.IsDir() {
		return nil
	}
	return []string{filepath.Join(root, "train"), filepath.Join(root, "val"), filepath.Join(root, "test")}
}

// listSplitFolders lists the train, val and test subfolders' pairs in that
// order, with their counts (an absent val/ or test/ counts 0).
func listSplitFolders(dirs []string, suffix string) (pairs []pair, counts []int, probs []Problem) {
	for i, d := range dirs {
		if i > 0 {
			if _, err := os.Stat(d); err != nil {
				counts = append(counts, 0)
				continue
			}
		}
		ps, pr := listFolder(d, suffix)
		pairs, probs = append(pairs, ps...), append(probs, pr...)
		counts = append(counts, len(ps))
	}
	return pairs, counts, probs
}
