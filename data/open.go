package data

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// SizeCount is one distinct image size and how many images have it.
type SizeCount struct {
	H, W  int
	Count int
	First string // the first image of this size
}

// Report is what opening a dataset found: counts, sizes, mask values, the
// value -> class mapping and every problem, each naming its file.
type Report struct {
	Source, Path string
	MaskSuffix   string
	Samples      int
	Train, Val   int
	// ValFromLists says the split is VOC's train.txt / val.txt.
	ValFromLists bool
	// SplitFolders says the split is a folder set's train/, val/ and test/
	// subfolders; Test counts the test samples (never trained or
	// validated on; memunet eval and predict dataset:test use them).
	SplitFolders bool
	Test         int
	Channels     int
	Classes      int
	// Sizes are the distinct source image sizes, most frequent first.
	Sizes []SizeCount
	// Height and Width are the size samples have after resizing (0 when
	// unknown because of a problem); Resized says how they got it, Patched
	// that they are patches (data.patch).
	Height, Width int
	Resized       string
	Patched       string
	// Values are the raw mask values found, ascending, each with its
	// pixels and the masks holding it; Value looks one up.
	Values []MaskValue
	// MaskFormats are how the masks store their values (bit depth, kind
	// and file type), most frequent first.
	MaskFormats []MaskFormat
	// ImageFormats are how the images store theirs, most frequent first.
	ImageFormats []ImageFormat
	// Slicing says how nifti volumes became slices: counts, the axis, the
	// intensity window.
	Slicing string
	// Mapping is the class of each raw value 0..MaxMaskValue, indexed by
	// the value (-1: not a class; Ignore: ignored); Discovered says it came
	// from a scan; MappingDesc says how.
	Mapping     []int16
	Discovered  bool
	MappingDesc string
	Problems    []Problem
}

// MaxMaskValue is the largest raw mask value: masks are read by value,
// 0..255 from 8-bit masks and 0..65535 from 16-bit gray ones.
const MaxMaskValue = 1<<16 - 1

// MaskValue is one raw mask value found: its pixels in all masks, how many
// masks hold it and the first of them.
type MaskValue struct {
	Value     int
	Pixels    int64
	Masks     int
	FirstMask string
}

// MaskFormat is one way of storing mask values and the masks that use it.
type MaskFormat struct {
	// Format is the bit depth, kind and file type, e.g. "16-bit gray PNG",
	// "8-bit palette PNG" or "palette GIF".
	Format string
	// Bits is 16 for masks whose values are 16-bit (0..65535), else 8.
	Bits  int
	Masks int
	First string // the first mask stored so
}

// ImageFormat is one way of storing images and the images that use it.
type ImageFormat struct {
	// Format is the bit depth, kind and file type, e.g. "8-bit RGB PNG" or
	// "16-bit gray TIFF (tiled 256x256, LZW)".
	Format string
	// Bits is 16 for images read at 16 bits per channel (raw intensity
	// p/65535), else 8 (p/255).
	Bits   int
	Images int
	First  string // the first image stored so
}

// Value returns what the report found of raw mask value v (zero counts
// when no mask holds it).
func (r *Report) Value(v int) MaskValue {
	k, ok := slices.BinarySearchFunc(r.Values, v, func(m MaskValue, v int) int { return cmp.Compare(m.Value, v) })
	if !ok {
		return MaskValue{Value: v}
	}
	return r.Values[k]
}

// Fatal returns the problems that stop training.
func (r *Report) Fatal() []Problem {
	var out []Problem
	for _, p := range r.Problems {
		if p.Fatal {
			out = append(out, p)
		}
	}
	return out
}

// Err is nil, or the first fatal problem with a count of the others (a
// *ProblemsError).
func (r *Report) Err() error {
	f := r.Fatal()
	if len(f) == 0 {
		return nil
	}
	return &ProblemsError{First: f[0], More: len(f) - 1}
}

// ProblemsError is a dataset that cannot be trained on: its first fatal
// problem, and how many more there are.
type ProblemsError struct {
	First Problem
	More  int
	// Check is the command that lists them all, with the user's --config
	// and --set (config.Invocation); "" says "memunet data check".
	Check string
}

func (e *ProblemsError) Error() string {
	if e.More == 0 {
		return "data: " + e.First.Error()
	}
	check := e.Check
	if check == "" {
		check = "memunet data check"
	}
	return fmt.Sprintf("data: %v (and %s; %s lists them all)", e.First, plural(e.More, "more problem", "more problems"), check)
}

func (e *ProblemsError) Unwrap() error { return e.First }

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
	rep := &Report{Source: cfg.Source, Path: cfg.Path, MaskSuffix: cfg.MaskSuffix, Channels: cfg.Channels, Classes: cfg.Classes,
		Mapping: make([]int16, MaxMaskValue+1)}
	for v := range rep.Mapping {
		rep.Mapping[v] = -1
	}
	var src ImageSource
	var split func(n int) (train, val []int)
	var stamps []stamp
	var files, contents string // Fingerprint.Files, .Contents
	var testIdx []int
	switch cfg.Source {
	case SourceSynthetic:
		syn, err := NewSyntheticExact(cfg.Synthetic()) // the config gives every field; data.noise: 0 means none
		if err != nil {
			return nil, nil, err
		}
		src = syn
		n, _ := syn.Size()
		rep.Sizes = []SizeCount{{H: n, W: n, Count: syn.Len()}}
		for k := range cfg.Classes {
			rep.Mapping[k] = int16(k)
		}
		rep.MappingDesc = "the synthetic masks hold class indices"
		if full {
			if err := checkSynthetic(ctx, syn, rep); err != nil {
				return nil, nil, err
			}
		}
	case SourceFolder, SourceVOC:
		var pairs []pair
		var probs []Problem
		nTrain, hasVal := 0, false
		var splitDirs []string // folder: the train/, val/, test/ layout
		if cfg.Source == SourceFolder {
			if splitDirs = splitFolders(cfg.Path); splitDirs != nil {
				var counts []int
				pairs, counts, probs = listSplitFolders(splitDirs, cfg.MaskSuffix)
				nTrain, nVal, nTest := counts[0], counts[1], counts[2]
				rep.SplitFolders, rep.Test = true, nTest
				testIdx = seq(nTrain+nVal, nTrain+nVal+nTest)
				if nVal > 0 {
					split = func(int) ([]int, []int) { return seq(0, nTrain), seq(nTrain, nTrain+nVal) }
				} else {
					split = func(int) ([]int, []int) { return Split(nTrain, cfg.ValFraction, cfg.Seed) }
				}
			} else {
				pairs, probs = listFolder(cfg.Path, cfg.MaskSuffix)
			}
		} else {
			pairs, nTrain, hasVal, probs = listVOC(cfg.Path)
		}
		rep.Problems = probs
		rep.Samples = len(pairs)
		dirs := []string{filepath.Join(cfg.Path, "images"), filepath.Join(cfg.Path, "masks")}
		for _, d := range splitDirs {
			dirs = append(dirs, filepath.Join(d, "images"), filepath.Join(d, "masks"))
		}
		if cfg.Source == SourceVOC {
			dirs = []string{filepath.Join(cfg.Path, "JPEGImages"), filepath.Join(cfg.Path, "SegmentationClass"),
				filepath.Join(cfg.Path, vocTrainList), filepath.Join(cfg.Path, vocValList)}
		}
		for _, d := range dirs {
			stamps = append(stamps, stampOf(d))
		}
		for _, p := range pairs {
			stamps = append(stamps, stampOf(p.image), stampOf(p.mask))
		}
		fs, err := scanFiles(ctx, cfg, pairs, rep)
		if err != nil {
			return nil, nil, err
		}
		if fs == nil {
			return nil, rep, nil
		}
		src = fs
		files, contents = fingerprintOf(cfg.Path, fs.pairs, fs.lut), fs.contents
		if hasVal {
			rep.ValFromLists = true
			split = func(n int) ([]int, []int) { return seq(0, nTrain), seq(nTrain, n) }
		} else if cfg.Source == SourceVOC {
			split = func(int) ([]int, []int) { return Split(nTrain, cfg.ValFraction, cfg.Seed) }
		}
	case SourceNIfTI:
		ns, sp, st, fp := openNIfTI(cfg, rep)
		stamps = st
		if ns == nil {
			return nil, rep, nil
		}
		src, split, files, contents = ns, sp, fp, ns.contents
	default:
		return nil, nil, fmt.Errorf("data.source: %q: must be synthetic, folder, voc or nifti", cfg.Source)
	}
	if split == nil {
		split = func(n int) ([]int, []int) { return Split(n, cfg.ValFraction, cfg.Seed) }
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
			fingerprint: Fingerprint{Samples: ds.Len(), Train: len(train), Val: len(val), Height: h, Width: w, Files: files, Contents: contents}}
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

// scanFiles reads every pair in full, fills the report and returns the
// source, or nil when a fatal problem leaves nothing to build; the error is
// ctx's, once it is done.
func scanFiles(ctx context.Context, cfg SourceConfig, pairs []pair, rep *Report) (*files, error) {
	decodes := newBudget(cfg.DecodeBytes)
	results, err := scanPairs(ctx, pairs, cfg.MaxPixels, decodes)
	if err != nil {
		return nil, fmt.Errorf("data: reading %s stopped: %w", cfg.Path, err)
	}
	good := tally(cfg, pairs, results, rep)
	if good == nil {
		return nil, nil
	}
	var ok []pair
	var sums [][2]fileSum
	for k, p := range pairs {
		if good[k] {
			ok = append(ok, p)
			sums = append(sums, results[k].sums)
		}
	}
	f := &files{
		desc:      fmt.Sprintf("%s dataset %s (%d samples)", cfg.Source, cfg.Path, len(ok)),
		pairs:     ok,
		channels:  cfg.Channels,
		classes:   cfg.Classes,
		lut:       slices.Clone(rep.Mapping),
		mapDesc:   rep.MappingDesc,
		maxPixels: cfg.MaxPixels,
		decodes:   decodes,
	}
	f.contents = contentsOf(cfg.Path, ok, sums, f.lut)
	var fits bool
	if f.h, f.w, fits = commonSize(cfg, rep); !fits {
		return nil, nil
	}
	return f, nil
}

// tally fills rep from the scan of every pair (sizes, formats, mask
// values, the value -> class mapping, problems) and returns which pairs
// are usable, or nil after a fatal problem.
func tally(cfg SourceConfig, pairs []pair, results []scanned, rep *Report) []bool {
	sizes := map[[2]int]*SizeCount{}
	values := map[int]*MaskValue{}
	formats := map[string]*MaskFormat{}
	imgFormats := map[string]*ImageFormat{}
	masksOf := map[int][]int{} // pairs holding each value, for errors
	good := make([]bool, len(pairs))
	for k, s := range results {
		p := pairs[k]
		if s.err != nil {
			rep.Problems = append(rep.Problems, Problem{File: "", Msg: s.err.Error(), Fatal: true})
			continue
		}
		sz := [2]int{s.imgH, s.imgW}
		if sizes[sz] == nil {
			sizes[sz] = &SizeCount{H: s.imgH, W: s.imgW, First: p.image}
		}
		sizes[sz].Count++
		if imgFormats[s.imgFormat] == nil {
			imgFormats[s.imgFormat] = &ImageFormat{Format: s.imgFormat, Bits: s.imgBits, First: p.image}
		}
		imgFormats[s.imgFormat].Images++
		if formats[s.maskFormat] == nil {
			formats[s.maskFormat] = &MaskFormat{Format: s.maskFormat, Bits: s.maskBits, First: p.mask}
		}
		formats[s.maskFormat].Masks++
		if s.maskW != s.imgW || s.maskH != s.imgH {
			rep.Problems = append(rep.Problems, fatal(p.mask, "is %dx%d (height x width) but its image %s is %dx%d; a mask must be the size of its image",
				s.maskH, s.maskW, p.image, s.imgH, s.imgW))
			continue
		}
		good[k] = true
		for _, vc := range s.hist {
			v := int(vc.value)
			if values[v] == nil {
				values[v] = &MaskValue{Value: v, FirstMask: p.mask}
			}
			values[v].Pixels += vc.pixels
			values[v].Masks++
			masksOf[v] = append(masksOf[v], k)
		}
	}
	for _, s := range sizes {
		rep.Sizes = append(rep.Sizes, *s)
	}
	slices.SortFunc(rep.Sizes, func(a, b SizeCount) int {
		return cmp.Or(-cmp.Compare(a.Count, b.Count), cmp.Compare(a.First, b.First))
	})
	for _, v := range slices.Sorted(maps.Keys(values)) {
		rep.Values = append(rep.Values, *values[v])
	}
	for _, f := range formats {
		rep.MaskFormats = append(rep.MaskFormats, *f)
	}
	slices.SortFunc(rep.MaskFormats, func(a, b MaskFormat) int {
		return cmp.Or(-cmp.Compare(a.Masks, b.Masks), cmp.Compare(a.First, b.First))
	})
	for _, f := range imgFormats {
		rep.ImageFormats = append(rep.ImageFormats, *f)
	}
	slices.SortFunc(rep.ImageFormats, func(a, b ImageFormat) int {
		return cmp.Or(-cmp.Compare(a.Images, b.Images), cmp.Compare(a.First, b.First))
	})
	if p, ok := mixedDepths(rep.MaskFormats); ok {
		rep.Problems = append(rep.Problems, p)
	}

	// The mapping of raw values to classes.
	mapping := rep.Mapping
	switch {
	case len(cfg.MaskValues) > 0:
		for k, v := range cfg.MaskValues {
			mapping[v] = int16(k)
		}
		rep.MappingDesc = fmt.Sprintf("data.mask_values is %v (the k-th value is class k)", cfg.MaskValues)
		if cfg.Source == SourceVOC && mapping[255] < 0 {
			mapping[255] = int16(Ignore)
			rep.MappingDesc += "; 255 is ignored"
		}
	case cfg.Source == SourceVOC:
		for k := range cfg.Classes {
			mapping[k] = int16(k)
		}
		mapping[255] = int16(Ignore)
		rep.MappingDesc = fmt.Sprintf("VOC masks hold class indices 0..%d (model.classes %d) and 255 (ignored)", cfg.Classes-1, cfg.Classes)
	case len(rep.Values) == 0: // nothing was read: the problems say why
	default: // folder: discover
		rep.Discovered = true
		found := make([]int, len(rep.Values))
		for k, mv := range rep.Values {
			found[k] = mv.Value
		}
		for k, v := range found {
			if k < cfg.Classes {
				mapping[v] = int16(k)
			}
		}
		rep.MappingDesc = fmt.Sprintf("the masks hold the values %s, mapped in ascending order to classes 0..%d (found by a scan; data.mask_values sets them)",
			shortList(found), min(len(found), cfg.Classes)-1)
		switch {
		case len(found) > MaxClasses:
			// No model.classes takes them: a hint must not name one out
			// of range (1027 values once said "set model.classes: 1027").
			extra := found[MaxClasses]
			format := results[masksOf[extra][0]].maskFormat
			rep.Problems = append(rep.Problems, fatal(rep.Value(extra).FirstMask,
				"the masks hold %d distinct values %s, more than memunet's maximum of %d classes (model.classes), so they are not one value per class (value %d, the %dth, first occurs here, a %s); check that the masks are class masks, not instance labels or images, and re-export them with one value per class, or set data.mask_values to the at most %d values that are classes",
				len(found), shortList(found), MaxClasses, extra, MaxClasses+1, format, MaxClasses))
			return nil
		case len(found) > cfg.Classes:
			extra := found[cfg.Classes]
			rep.Problems = append(rep.Problems, fatal(rep.Value(extra).FirstMask,
				"the masks hold %d distinct values %s but model.classes is %d (value %d first occurs here); set model.classes: %d, or data.mask_values to the %d values that are classes",
				len(found), shortList(found), cfg.Classes, extra, len(found), cfg.Classes))
			return nil
		case len(found) < cfg.Classes:
			rep.Problems = append(rep.Problems, warning(cfg.Path, "the masks hold only %d distinct values %v, so classes %d..%d never occur; lower model.classes or set data.mask_values",
				len(found), found, len(found), cfg.Classes-1))
		}
	}
	// Values that are not classes, one problem per mask.
	bad := map[int][]int{}
	for _, mv := range rep.Values {
		if mapping[mv.Value] < 0 {
			for _, k := range masksOf[mv.Value] {
				bad[k] = append(bad[k], mv.Value)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(bad)) {
		var pix int64
		for _, vc := range results[k].hist {
			if mapping[vc.value] < 0 {
				pix += vc.pixels
			}
		}
		vals := bad[k]
		fix := "add it to data.mask_values or fix the mask"
		if cfg.Source == SourceVOC && len(cfg.MaskValues) == 0 {
			fix = "raise model.classes or fix the mask"
			if slices.Max(vals) >= MaxClasses { // no model.classes reaches it
				fix = fmt.Sprintf("set data.mask_values to the values that are classes (model.classes is at most %d), or fix the mask", MaxClasses)
			}
		}
		what := fmt.Sprintf("mask value %d", vals[0])
		if len(vals) > 1 {
			what = fmt.Sprintf("mask values %s", shortList(vals))
		}
		rep.Problems = append(rep.Problems, fatal(pairs[k].mask, "%s (%d pixels) is not a class: %s; %s", what, pix, rep.MappingDesc, fix))
		good[k] = false
	}

	if hasFatal(rep.Problems) {
		return nil
	}
	return good
}

// commonSize is the size every image has (0, 0 when they differ and
// data.resize makes them one); fits is false, with a fatal problem in
// rep, when they differ and nothing makes them one.
func commonSize(cfg SourceConfig, rep *Report) (h, w int, fits bool) {
	if len(rep.Sizes) == 1 {
		return rep.Sizes[0].H, rep.Sizes[0].W, true
	}
	if len(rep.Sizes) > 1 && len(cfg.Resize) == 0 && len(cfg.Patch) == 0 {
		a, b := rep.Sizes[0], rep.Sizes[1]
		why := ""
		if cfg.Scale > 0 {
			why = " (data.scale keeps their differences)"
		}
		rep.Problems = append(rep.Problems, fatal(b.First, "is %dx%d (height x width) but %s is %dx%d: the images have %d different sizes%s; set data.resize: [H, W] to scale them all to one size",
			b.H, b.W, a.First, a.H, a.W, len(rep.Sizes), why))
		return 0, 0, false
	}
	return 0, 0, true
}

// checkSynthetic counts the classes of every synthetic sample; the error
// is ctx's, once it is done.
func checkSynthetic(ctx context.Context, s *Synthetic, rep *Report) error {
	n := s.cfg.Size
	raw := make([]float32, SyntheticChannels*n*n)
	mask := make([]uint8, n*n)
	var vals [256]MaskValue
	for i := range s.Len() {
		if i%256 == 0 && ctx.Err() != nil {
			return fmt.Errorf("data: checking the synthetic samples stopped: %w", ctx.Err())
		}
		s.generate(i, raw, mask, nil)
		var seen [256]bool
		for _, v := range mask {
			vals[v].Pixels++
			seen[v] = true
		}
		for v, ok := range seen {
			if ok {
				vals[v].Masks++
				if vals[v].FirstMask == "" {
					vals[v].FirstMask = fmt.Sprintf("sample %d", i)
				}
			}
		}
	}
	for v, mv := range vals {
		if mv.Masks > 0 {
			mv.Value = v
			rep.Values = append(rep.Values, mv)
		}
	}
	return nil
}

// mixedDepths is a warning when some masks are 8-bit and others 16-bit:
// their values are read as they are (a 16-bit 257 is not an 8-bit 1), so
// masks exported by different tools may disagree.
func mixedDepths(formats []MaskFormat) (Problem, bool) {
	var by [2][]MaskFormat // 8-bit, 16-bit
	for _, f := range formats {
		k := 0
		if f.Bits > 8 {
			k = 1
		}
		by[k] = append(by[k], f)
	}
	if len(by[0]) == 0 || len(by[1]) == 0 {
		return Problem{}, false
	}
	count := func(fs []MaskFormat) (n int) {
		for _, f := range fs {
			n += f.Masks
		}
		return n
	}
	few, many := by[1], by[0] // name the first mask of the rarer depth
	if count(by[0]) < count(by[1]) {
		few, many = by[0], by[1]
	}
	return warning(few[0].First, "is stored as %s but %s stored as %s (first %s): the masks mix 8-bit and 16-bit values, each read by value (16-bit ones 0..65535, not scaled to 8 bits); check that they hold the same class values",
		few[0].Format, plural(count(many), "other mask is", "other masks are"), many[0].Format, many[0].First), true
}

// plural is "1 mask" or "2 masks".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shortList prints a list of values as %v does, the middle left out of a
// long one.
func shortList(vs []int) string {
	if len(vs) <= 20 {
		return fmt.Sprint(vs)
	}
	return fmt.Sprintf("%v ... %v (%d values)", vs[:10], vs[len(vs)-5:], len(vs))
}

// MaxClasses is the most classes a model has (model.classes): a class
// is a byte, and 255 is Ignore.
const MaxClasses = 255

// maxListedValues bounds the mask values Write lists one by one.
const maxListedValues = 256

// Write prints the report for people: counts, sizes, the mask-value
// histogram with the class of each value, and every problem.
func (r *Report) Write(w io.Writer) {
	where := r.Source
	if r.Source != SourceSynthetic {
		where += " " + r.Path
		if r.MaskSuffix != "" {
			where += fmt.Sprintf(" (mask suffix %q)", r.MaskSuffix)
		}
	}
	fmt.Fprintf(w, "data: %s\n", where)
	split := "data.val_fraction"
	switch {
	case r.ValFromLists:
		split = "train.txt / val.txt"
	case r.SplitFolders && r.Val > 0 && r.Train+r.Val+r.Test == r.Samples:
		split = "the train/ val/ test/ folders"
	case r.SplitFolders:
		split = "the train/ and test/ folders, val by data.val_fraction of train/"
	case r.Source == SourceNIfTI:
		split = "volume, data.val_fraction of the volumes"
	}
	test := ""
	if r.SplitFolders {
		test = fmt.Sprintf(", test %d", r.Test)
	}
	if r.Train+r.Val > 0 {
		fmt.Fprintf(w, "samples: %d (train %d, val %d%s, split by %s); %d channel(s), %d classes\n", r.Samples, r.Train, r.Val, test, split, r.Channels, r.Classes)
	} else {
		fmt.Fprintf(w, "samples: %d listed (not split: see the problems); %d channel(s), %d classes\n", r.Samples, r.Channels, r.Classes)
	}
	if len(r.Sizes) > 0 {
		var parts []string
		for k, s := range r.Sizes {
			if k == 5 {
				parts = append(parts, fmt.Sprintf("and %d more sizes", len(r.Sizes)-k))
				break
			}
			parts = append(parts, fmt.Sprintf("%dx%d: %d", s.H, s.W, s.Count))
		}
		fmt.Fprintf(w, "image sizes (height x width: images): %s\n", strings.Join(parts, ", "))
	}
	if r.Height > 0 {
		how := "as they are"
		if r.Resized != "" {
			how = "by " + r.Resized
		}
		if r.Patched != "" {
			how = r.Patched
		}
		fmt.Fprintf(w, "training size: %dx%d (%s)\n", r.Height, r.Width, how)
	}
	if r.Slicing != "" {
		fmt.Fprintf(w, "volumes: %s\n", r.Slicing)
	}
	if len(r.ImageFormats) > 0 {
		var parts []string
		for _, f := range r.ImageFormats {
			part := fmt.Sprintf("%s (%s", f.Format, plural(f.Images, "image", "images"))
			if len(r.ImageFormats) > 1 {
				part += ", first " + f.First
			}
			if f.Bits > 8 && r.Source != SourceNIfTI {
				part += "; values read whole, v = p/65535 before data.mean/std"
			}
			parts = append(parts, part+")")
		}
		fmt.Fprintf(w, "images: %s\n", strings.Join(parts, ", "))
	}
	if len(r.MaskFormats) > 0 {
		var parts []string
		for _, f := range r.MaskFormats {
			part := fmt.Sprintf("%s (%s", f.Format, plural(f.Masks, "mask", "masks"))
			if len(r.MaskFormats) > 1 {
				part += ", first " + f.First
			}
			if f.Bits > 8 {
				part += "; values read whole, 0..65535"
			}
			parts = append(parts, part+")")
		}
		fmt.Fprintf(w, "masks: %s\n", strings.Join(parts, ", "))
	}
	var total int64
	for _, mv := range r.Values {
		total += mv.Pixels
	}
	if total > 0 {
		fmt.Fprintf(w, "mask values (value -> class: pixels, share, masks holding it):\n")
		width := max(3, len(fmt.Sprint(r.Values[len(r.Values)-1].Value)))
		for k, mv := range r.Values {
			if k == maxListedValues && len(r.Values) > maxListedValues+1 {
				var rest int64
				for _, mv := range r.Values[k:] {
					rest += mv.Pixels
				}
				fmt.Fprintf(w, "  and %d more values (%d px, %.2f%%): memunet reads 16-bit masks by value; are these masks images?\n",
					len(r.Values)-k, rest, 100*float64(rest)/float64(total))
				break
			}
			cls := "not a class"
			switch c := r.Mapping[mv.Value]; {
			case c == int16(Ignore):
				cls = "ignored"
			case c >= 0:
				cls = fmt.Sprintf("class %d", c)
			}
			fmt.Fprintf(w, "  %*d -> %-11s %12d px  %6.2f%%  %d masks\n", width, mv.Value, cls+":", mv.Pixels, 100*float64(mv.Pixels)/float64(total), mv.Masks)
		}
	}
	if r.MappingDesc != "" {
		fmt.Fprintf(w, "mapping: %s\n", r.MappingDesc)
	}
	if r.Discovered {
		if vals := r.discoveredValues(); len(vals) > 0 && len(r.Values) <= r.Classes {
			fmt.Fprintf(w, "to fix this mapping, set data.mask_values: %s\n", formatInts(vals))
		}
	}
	fatal := r.Fatal()
	switch {
	case len(r.Problems) == 0:
		fmt.Fprintf(w, "problems: none\n")
	default:
		fmt.Fprintf(w, "problems: %d (%d errors, %d warnings)\n", len(r.Problems), len(fatal), len(r.Problems)-len(fatal))
		for _, p := range r.Problems {
			kind := "warning"
			if p.Fatal {
				kind = "error"
			}
			fmt.Fprintf(w, "  %s: %s\n", kind, p.Error())
		}
	}
}

func (r *Report) discoveredValues() []int {
	var vals []int
	for v, c := range r.Mapping {
		if c >= 0 && c != int16(Ignore) {
			vals = append(vals, v)
		}
	}
	slices.SortFunc(vals, func(a, b int) int { return cmp.Compare(r.Mapping[a], r.Mapping[b]) })
	return vals
}

func formatInts(vs []int) string {
	parts := make([]string, len(vs))
	for k, v := range vs {
		parts[k] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Summary is one line about an opened set, for logs; it includes the
// discovered mapping when there is one, and check, the command that lists
// the warnings ("" says "memunet data check").
func (r *Report) Summary(check string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "data: %s %s: %d samples (train %d, val %d)", r.Source, filepath.Clean(r.Path), r.Samples, r.Train, r.Val)
	if len(r.Sizes) == 1 {
		fmt.Fprintf(&b, ", %dx%d", r.Sizes[0].H, r.Sizes[0].W)
	} else if len(r.Sizes) > 1 {
		fmt.Fprintf(&b, ", %d image sizes", len(r.Sizes))
	}
	if r.Resized != "" {
		fmt.Fprintf(&b, " -> %dx%d by %s", r.Height, r.Width, r.Resized)
	}
	if len(r.MaskFormats) > 0 {
		var fs []string
		for _, f := range r.MaskFormats {
			fs = append(fs, f.Format)
		}
		fmt.Fprintf(&b, "; masks: %s", strings.Join(fs, ", "))
	}
	if r.Discovered {
		vals := r.discoveredValues()
		parts := make([]string, len(vals))
		for k, v := range vals {
			parts[k] = fmt.Sprintf("%d->%d", v, k)
		}
		fmt.Fprintf(&b, "; mask values found by a scan: %s (set data.mask_values: %s to fix them)", strings.Join(parts, " "), formatInts(vals))
	}
	if n := len(r.Problems); n > 0 {
		if check == "" {
			check = "memunet data check"
		}
		fmt.Fprintf(&b, "; %s (%s lists them)", plural(n, "warning", "warnings"), check)
	}
	return b.String()
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

// ProbeSize returns the height and width the samples of cfg will have,
// reading as little as it can: data.resize if set; for the synthetic set
// its size; for files the header of the first image. data.scale applies to
// the latter two. It does not check the files (Open does, and requires
// every image to have the first one's size unless data.resize is set);
// an error means the size cannot be told.
func ProbeSize(cfg SourceConfig) (h, w int, err error) {
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

// ClassValues is the raw mask value of each class 0..classes-1 (the
// smallest that maps to it), so predictions can be written in the
// dataset's own values; nil when every class is its own value (synthetic,
// VOC, masks holding class indices).
func (r *Report) ClassValues(classes int) []int {
	vals := make([]int, classes)
	for k := range vals {
		vals[k] = -1
	}
	for v, c := range r.Mapping {
		if c >= 0 && int(c) < classes && vals[c] < 0 {
			vals[c] = v
		}
	}
	identity := true
	for k, v := range vals {
		if v < 0 {
			vals[k] = k // a class no mask holds: its index
		}
		identity = identity && vals[k] == k
	}
	if identity {
		return nil
	}
	return vals
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
