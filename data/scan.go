package data

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

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
	for _, s := range rep.Sizes {
		f.largest = max(f.largest, int64(s.H)*int64(s.W))
	}
	for _, im := range rep.ImageFormats {
		f.deep = f.deep || im.Bits > 8
	}
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
	case len(cfg.Labels) > 0:
		for v, c := range cfg.Labels {
			mapping[v] = int16(c)
		}
		rep.MappingDesc = fmt.Sprintf("data.labels maps %s", cfg.Labels.describe())
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
		if len(cfg.Labels) > 0 {
			fix = "map it in data.labels (to a class or ignore) or fix the mask"
		}
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
		if cfg.Volumes() { // data.resize is refused for volumes
			rep.Problems = append(rep.Problems, fatal(b.First, "has %dx%d (height x width) slices but %s has %dx%d: whole volumes train only when all have one size; set data.patch: [D, H, W] to train on patches",
				b.H, b.W, a.First, a.H, a.W))
			return 0, 0, false
		}
		rep.Problems = append(rep.Problems, fatal(b.First, "is %dx%d (height x width) but %s is %dx%d: the images have %d different sizes%s; set data.resize: [H, W] to scale them all to one size",
			b.H, b.W, a.First, a.H, a.W, len(rep.Sizes), why))
		return 0, 0, false
	}
	return 0, 0, true
}

// fileSource is data.source folder (images/ and masks/, or train/ val/
// test/ folders of them) and voc (a VOCdevkit root).
type fileSource struct{ voc bool }

func (s fileSource) open(ctx context.Context, cfg SourceConfig, rep *Report, _ bool) (found, error) {
	var fd found
	var pairs []pair
	var probs []Problem
	nTrain, hasVal := 0, false
	var splitDirs []string // folder: the train/, val/, test/ layout
	if !s.voc {
		if splitDirs = splitFolders(cfg.Path); splitDirs != nil {
			var counts []int
			pairs, counts, probs = listSplitFolders(splitDirs, cfg.MaskSuffix)
			nTrain, nVal, nTest := counts[0], counts[1], counts[2]
			rep.SplitFolders, rep.Test = true, nTest
			fd.test = seq(nTrain+nVal, nTrain+nVal+nTest)
			if nVal > 0 {
				probs = append(probs, cfg.foldsRefused(splitDirs[1], "its val/ folder", "move val/'s samples into train/ to fold them all")...)
				fd.split = func(int) ([]int, []int) { return seq(0, nTrain), seq(nTrain, nTrain+nVal) }
			} else {
				fd.split = func(int) ([]int, []int) { return cfg.RandomSplit(nTrain) }
			}
		} else {
			pairs, probs = listFolder(cfg.Path, cfg.MaskSuffix)
		}
	} else {
		pairs, nTrain, hasVal, probs = listVOC(cfg.Path)
		if hasVal {
			probs = append(probs, cfg.foldsRefused(filepath.Join(cfg.Path, vocValList), vocValList, "move val.txt's ids into train.txt (val.txt empty) to fold them all")...)
		}
	}
	rep.Problems = probs
	rep.Samples = len(pairs)
	dirs := []string{filepath.Join(cfg.Path, "images"), filepath.Join(cfg.Path, "masks")}
	for _, d := range splitDirs {
		dirs = append(dirs, filepath.Join(d, "images"), filepath.Join(d, "masks"))
	}
	if s.voc {
		dirs = []string{filepath.Join(cfg.Path, "JPEGImages"), filepath.Join(cfg.Path, "SegmentationClass"),
			filepath.Join(cfg.Path, vocTrainList), filepath.Join(cfg.Path, vocValList)}
	}
	for _, d := range dirs {
		fd.stamps = append(fd.stamps, stampOf(d))
	}
	for _, p := range pairs {
		fd.stamps = append(fd.stamps, stampOf(p.image), stampOf(p.mask))
	}
	fs, err := scanFiles(ctx, cfg, pairs, rep)
	if err != nil || fs == nil {
		return found{}, err
	}
	fd.src = fs
	fd.files, fd.contents = fingerprintOf(cfg.Path, fs.pairs, fs.lut), fs.contents
	if hasVal {
		rep.ValFromLists = true
		fd.split = func(n int) ([]int, []int) { return seq(0, nTrain), seq(nTrain, n) }
	} else if s.voc {
		fd.split = func(int) ([]int, []int) { return cfg.RandomSplit(nTrain) }
	}
	return fd, nil
}

// scanned is what a full read of one pair found.
type scanned struct {
	imgW, imgH   int
	imgBits      int    // 16 for 16-bit images (values p/65535), else 8
	imgFormat    string // e.g. "16-bit gray TIFF (tiled 256x256, LZW)"
	maskW, maskH int
	maskBits     int          // 8 or 16 (see maskPixels)
	maskFormat   string       // e.g. "16-bit gray PNG"
	hist         []valueCount // mask pixels per raw value, ascending
	sums         [2]fileSum   // the image's and the mask's bytes (Fingerprint.Contents)
	more         []fileSum    // a nifti case's other modalities' bytes
	err          error        // the image or the mask is unreadable (names the file)
}

type valueCount struct {
	value  uint16
	pixels int64
}

// scanPairs decodes every image and mask in full, in parallel (at most one
// pair per core, and no more at once than decodes's bytes allow), so that a
// truncated or corrupt file is found before training starts. It stops
// early, with ctx's error, once ctx is done.
func scanPairs(ctx context.Context, pairs []pair, maxPixels int, decodes *budget) ([]scanned, error) {
	out := make([]scanned, len(pairs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(pairs), 1)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= len(pairs) {
					return
				}
				out[k] = scanPair(pairs[k], maxPixels, decodes)
			}
		})
	}
	wg.Wait()
	return out, ctx.Err()
}

// scanPair decodes a pair and reads what the report needs: both sizes and
// formats, the image's and mask's depth, and the mask's histogram. Both
// headers are read first, so that the pair's decoding waits for its whole
// cost at once.
func scanPair(p pair, maxPixels int, decodes *budget) scanned {
	var s scanned
	img, mask, err := openPair(p, maxPixels)
	if err != nil {
		s.err = err
		return s
	}
	defer img.Close()
	defer mask.Close()
	// Hashed before the decode waits for its budget, holding no picture;
	// the decode then reads the bytes from the page cache.
	for k, f := range []*imageFile{img, mask} {
		if s.sums[k], err = sumReader(f.name, f.section()); err != nil {
			s.err = err
			return s
		}
	}
	defer decodes.acquire(img.decodedBytes()*img.pixels() + mask.maskCost())()
	picture, err := img.decode()
	if err != nil {
		s.err = err
		return s
	}
	s.imgW, s.imgH = picture.Bounds().Dx(), picture.Bounds().Dy()
	s.imgBits = 8
	if is16(picture) {
		s.imgBits = 16
	}
	s.imgFormat = img.fileFormat(s.imgBits)
	m, err := mask.decodeMask()
	if err != nil {
		s.err = err
		return s
	}
	s.maskW, s.maskH, s.maskBits, s.maskFormat = m.w, m.h, m.bits, m.format
	s.hist, s.err = m.histogram()
	return s
}

// openPair opens a pair's image and mask and reads their headers.
func openPair(p pair, maxPixels int) (img, mask *imageFile, err error) {
	if img, err = openImageFile(p.image, maxPixels); err != nil {
		return nil, nil, err
	}
	if mask, err = openImageFile(p.mask, maxPixels); err != nil {
		img.Close()
		return nil, nil, err
	}
	return img, mask, nil
}
