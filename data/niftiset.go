package data

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/memunet/memunet/internal/yamlvalue"
)

// SourceNIfTI reads NIfTI-1 volumes as 2D slices (config key data.source).
const SourceNIfTI = "nifti"

// NIfTIConfig is how volumes become slices (config section data.nifti).
type NIfTIConfig struct {
	// Axis is the axis the slices cross: 0 (x), 1 (y) or 2 (z, the last).
	Axis int `yaml:"axis"`
	// SkipEmpty drops the slices whose mask holds only background (class
	// 0) and ignored voxels.
	SkipEmpty bool `yaml:"skip_empty"`
	// Window [lo, hi] maps a voxel value x to the intensity (x-lo)/(hi-lo),
	// clamped to [0, 1]; empty: each volume's own minimum and maximum.
	Window yamlvalue.FloatList `yaml:"window"`
	// Normalize is window (the window to [0, 1], then data.mean and
	// data.std) or zscore (each volume by its own mean and std, after the
	// window's clipping where given); see Intensity.
	Normalize string `yaml:"normalize"`
}

// validate names the first invalid data.nifti setting.
func (c NIfTIConfig) validate() error {
	switch w := c.Window; {
	case c.Axis < 0 || c.Axis > 2:
		return fmt.Errorf("data.nifti.axis: %d: slices cross axis 0 (x), 1 (y) or 2 (z, the default)", c.Axis)
	case len(w) != 0 && len(w) != 2:
		return fmt.Errorf("data.nifti.window: %v: want [lo, hi] in the volumes' units, e.g. [-1000, 400] for CT, or [] for each volume's min and max", w)
	case len(w) == 2 && !(w[0] < w[1] && !math.IsInf(w[0], 0) && !math.IsInf(w[1], 0)):
		return fmt.Errorf("data.nifti.window: %v: lo must be below hi, both finite", w)
	case len(w) == 2 && math.IsInf(w[1]-w[0], 0):
		return fmt.Errorf("data.nifti.window: %v: hi - lo overflows float64; give the range of intensities that matters, e.g. [-1000, 400] for CT", w)
	case c.Normalize != "" && c.Normalize != NormalizeWindow && c.Normalize != NormalizeZScore:
		return fmt.Errorf("data.nifti.normalize: %q: must be %q (the window to [0, 1], then data.mean and data.std) or %q (each volume by its own mean and std, nnU-Net's for MRI)",
			c.Normalize, NormalizeWindow, NormalizeZScore)
	}
	return nil
}

// axisName names a volume axis for slice names.
var axisName = [3]string{"x", "y", "z"}

// niftiVolume is one image volume and its mask, as the scan found them.
type niftiVolume struct {
	pair
	dims [3]int
	in   []Intensity // how each channel's voxels are normalized
	// spacing words its voxel size, e.g. "0.8x0.8x3 mm"; size is it
	// along x, y, z
	spacing string
	size    [3]float64
	// values holds, per slice, the distinct raw mask values when there are
	// at most maxSliceValues of them (nil: more), for data.nifti.skip_empty.
	values [][]uint16
	// maskBytes and imageBytes are the stored voxels of its mask and of
	// its largest modality.
	maskBytes, imageBytes int64
}

// entryBytes is what the case takes in the volume cache (volumeEntry).
func (v *niftiVolume) entryBytes() int64 {
	n := int64(v.dims[0]) * int64(v.dims[1]) * int64(v.dims[2])
	return n * int64(2*len(v.in)+1)
}

// loadBytes is the most loading the case holds (niftiSet.load): its mask's
// voxels and its entry throughout, and one modality's voxels at a time.
func (v *niftiVolume) loadBytes() int64 { return v.maskBytes + v.entryBytes() + v.imageBytes }

// maxSliceValues bounds the values remembered per slice: a slice of more
// distinct values holds some class other than 0 and Ignore (each class
// has one value).
const maxSliceValues = 3

// niftiSample is one slice: volume vol, index k across the axis.
type niftiSample struct{ vol, k int }

// niftiSet is the ImageSource of data.source nifti: sample i is a slice of
// a volume, its intensities windowed to [0, 1] and kept at 16 bits, its
// mask's raw values mapped to classes by lut. Decoded volumes are kept in
// a bounded cache, since the slices of a shuffled epoch come from every
// volume in turn.
type niftiSet struct {
	desc     string
	vols     []niftiVolume
	samples  []niftiSample
	axis     int
	classes  int
	lut      []int16
	mapDesc  string
	h, w     int // the common slice size; 0 when slices differ in size
	maxBytes int64
	cache    *volumeCache
	contents string // Fingerprint.Contents
	channels int    // modalities per case
	// volSlices are each volume's samples (its slices, in z order); part
	// each volume's folder (partTrain...) where the set has train/ val/
	// test/ folders, else nil.
	volSlices [][]int
	part      []int
}

var (
	_ ImageSource = (*niftiSet)(nil)
	_ DeepImager  = (*niftiSet)(nil)
)

// HeldBytes is the volume cache, full or holding every case, and workers
// loads of the largest case at once.
func (n *niftiSet) HeldBytes(workers int) int64 {
	var all, load int64
	for k := range n.vols {
		all += n.vols[k].entryBytes()
		load = max(load, n.vols[k].loadBytes())
	}
	if n.cache != nil {
		all = min(all, n.cache.budget)
	}
	return all + int64(max(workers, 1))*load
}

func (n *niftiSet) Len() int         { return len(n.samples) }
func (n *niftiSet) Channels() int    { return n.channels }
func (n *niftiSet) Classes() int     { return n.classes }
func (n *niftiSet) Size() (h, w int) { return n.h, n.w }
func (n *niftiSet) String() string   { return n.desc }

func (n *niftiSet) caseOf(i int) Case {
	s := n.samples[i]
	v := &n.vols[s.vol]
	cols, rows := sliceAxes(n.axis)
	return Case{Name: v.id, Z: s.k, Depth: v.dims[n.axis], Spacing: [3]float64{v.size[cols], v.size[rows], v.size[n.axis]}}
}

// Name is sample i's name: its volume's file stem and the slice, e.g.
// "case01_z012".
func (n *niftiSet) Name(i int) string {
	if i < 0 || i >= len(n.samples) {
		return ""
	}
	s := n.samples[i]
	return fmt.Sprintf("%s_%s%03d", n.vols[s.vol].id, axisName[n.axis], s.k)
}

// Image is sample i as an 8-bit picture (the high byte of the windowed
// intensity) and its mask.
func (n *niftiSet) Image(i int) (*image.RGBA, *image.Gray, error) {
	img, mask, err := n.DeepImage(i)
	if err != nil {
		return nil, nil, err
	}
	return EightBit(img), mask, nil
}

// DeepImage is sample i at 16 bits (R = G = B) and its mask.
func (n *niftiSet) DeepImage(i int) (image.Image, *image.Gray, error) {
	if i < 0 || i >= len(n.samples) {
		return nil, nil, fmt.Errorf("data: sample %d out of range [0, %d)", i, len(n.samples))
	}
	s := n.samples[i]
	v := &n.vols[s.vol]
	e, err := n.cache.get(s.vol, func() (*volumeEntry, error) { return n.load(v) })
	if err != nil {
		return nil, nil, err
	}
	vol := Volume{Dims: v.dims}
	h, w := vol.SliceSize(n.axis)
	gray, mask := image.NewGray16(image.Rect(0, 0, w, h)), image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			k := vol.VoxelIndex(n.axis, s.k, y, x)
			q := e.img[k]
			gray.Pix[2*(y*w+x)], gray.Pix[2*(y*w+x)+1] = uint8(q>>8), uint8(q)
			mask.Pix[y*w+x] = e.cls[k]
		}
	}
	return toDeep(gray, true), mask, nil
}

// Sample fills image and mask with sample i, normalized as the package
// does: the windowed intensity v in [0, 1] (16 bits) as (v-Mean)/Std.
func (n *niftiSet) Sample(i int, img []float32, mask []uint8) error {
	if n.h == 0 {
		return fmt.Errorf("data: the slices differ in size; set data.resize: [H, W] to scale them to one size")
	}
	if err := checkSample(n, i, img, mask); err != nil {
		return err
	}
	oi, om, err := n.DeepImage(i)
	if err != nil {
		return err
	}
	if b := oi.Bounds(); b.Dx() != n.w || b.Dy() != n.h {
		return fmt.Errorf("%s: its slices are %dx%d (height x width), the others %dx%d; set data.resize: [H, W] to scale them to one size",
			n.vols[n.samples[i].vol].image, b.Dy(), b.Dx(), n.h, n.w)
	}
	normalizeDeep(oi, 1, img)
	s := n.samples[i]
	v := &n.vols[s.vol]
	if len(v.in) > 1 { // the other modalities, from the cached volume as DeepImage reads channel 0
		e, err := n.cache.get(s.vol, func() (*volumeEntry, error) { return n.load(v) })
		if err != nil {
			return err
		}
		vol, plane := Volume{Dims: v.dims}, n.h*n.w
		for ch := 1; ch < len(v.in); ch++ {
			for y := range n.h {
				for x := range n.w {
					q := e.img[ch*vol.Len()+vol.VoxelIndex(n.axis, s.k, y, x)]
					img[ch*plane+y*n.w+x] = (float32(q)/65535 - Mean) / Std
				}
			}
		}
	}
	for ch, in := range v.in {
		if a, b := in.Affine(); in.ZScore {
			plane := img[ch*n.h*n.w : (ch+1)*n.h*n.w]
			for p, x := range plane {
				plane[p] = x*a + b
			}
		}
	}
	copy(mask, om.Pix)
	return nil
}

// load reads a volume pair: intensities windowed to 16 bits, classes.
func (n *niftiSet) load(v *niftiVolume) (*volumeEntry, error) {
	m, err := ReadVolume(v.mask, n.maxBytes)
	if err != nil {
		return nil, err
	}
	if m.Dims != v.dims {
		return nil, fmt.Errorf("%s: the volume changed since the dataset was opened (now %s); open it again", v.mask, joinDims(m.Dims[:]))
	}
	voxels := m.Len()
	e := &volumeEntry{img: make([]uint16, len(v.in)*voxels), cls: make([]uint8, voxels)}
	for ch, path := range v.channels() {
		img, err := ReadVolume(path, n.maxBytes)
		if err != nil {
			return nil, err
		}
		if img.Dims != v.dims {
			return nil, fmt.Errorf("%s: the volume changed since the dataset was opened (now %s); open it again", path, joinDims(img.Dims[:]))
		}
		q := quantizer(v.in[ch].Lo, v.in[ch].Hi)
		for k := range voxels {
			e.img[ch*voxels+k] = q(img.At(k))
		}
	}
	for k := range e.cls {
		raw, ok := MaskLabel(m.At(k))
		c := int16(-1)
		if ok {
			c = n.lut[raw]
		}
		if c < 0 {
			x, y, z := k%v.dims[0], k/v.dims[0]%v.dims[1], k/(v.dims[0]*v.dims[1])
			return nil, fmt.Errorf("%s: mask value %g at voxel (%d, %d, %d) is not a class (%s)", v.mask, m.At(k), x, y, z, n.mapDesc)
		}
		e.cls[k] = uint8(c)
	}
	return e, nil
}

// quantizer maps a voxel value x to round((x-lo)/(hi-lo) * 65535),
// clamped to 0..65535: the windowed intensity at 16 bits (0 everywhere
// when hi <= lo).
func quantizer(lo, hi float64) func(x float64) uint16 {
	scale := 0.0
	if hi > lo {
		scale = 65535 / (hi - lo)
	}
	return func(x float64) uint16 { return uint16(math.Round(min(max((x-lo)*scale, 0), 65535))) }
}

// IntensityWindow is the [lo, hi] a volume's voxels are windowed by, as
// data.source nifti windows them: window (data.nifti.window) when given,
// else the volume's own min and max (see Intensity).
func (v *Volume) IntensityWindow(window []float64) (lo, hi float64) {
	in, _ := v.Intensity(NIfTIConfig{Window: window})
	return in.Lo, in.Hi
}

// SlicePicture is slice k across axis, windowed by [lo, hi] to 16 bits as
// data.source nifti reads its samples: an *image.RGBA64 (R = G = B), the
// slice's rows along the higher of the other two axes (see SliceSize).
func (v *Volume) SlicePicture(axis, k int, lo, hi float64) image.Image {
	h, w := v.SliceSize(axis)
	q := quantizer(lo, hi)
	gray := image.NewGray16(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			g := q(v.At(v.VoxelIndex(axis, k, y, x)))
			gray.Pix[2*(y*w+x)], gray.Pix[2*(y*w+x)+1] = uint8(g>>8), uint8(g)
		}
	}
	return toDeep(gray, true)
}

// MaskLabel is a mask voxel's value as a raw label 0..MaxMaskValue; ok is
// false for a negative, fractional or larger value.
func MaskLabel(x float64) (uint16, bool) {
	if x >= 0 && x <= MaxMaskValue && x == math.Trunc(x) {
		return uint16(x), true
	}
	return 0, false
}

// volumeEntry is a loaded volume: windowed intensities and classes.
type volumeEntry struct {
	img []uint16
	cls []uint8
}

func (e *volumeEntry) bytes() int64 { return int64(len(e.img))*2 + int64(len(e.cls)) }

// niftiCacheBytes bounds the decoded volumes a nifti set keeps.
const niftiCacheBytes = 1 << 30

// volumeCache keeps recently used volumes up to a byte budget, least
// recently used out first. Safe for concurrent use; a volume asked for by
// several goroutines at once is loaded once.
type volumeCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	tick    int64
	entries map[int]*cacheSlot
}

type cacheSlot struct {
	once  sync.Once
	entry *volumeEntry
	err   error
	last  int64
	size  int64
}

func newVolumeCache(budget int64) *volumeCache {
	return &volumeCache{budget: budget, entries: map[int]*cacheSlot{}}
}

// get returns volume k, loading it with load if it is not kept.
func (c *volumeCache) get(k int, load func() (*volumeEntry, error)) (*volumeEntry, error) {
	c.mu.Lock()
	s := c.entries[k]
	if s == nil {
		s = &cacheSlot{}
		c.entries[k] = s
	}
	c.tick++
	s.last = c.tick
	c.mu.Unlock()
	s.once.Do(func() { s.entry, s.err = load() })
	if s.err != nil {
		c.mu.Lock()
		if c.entries[k] == s {
			delete(c.entries, k) // try again next time
		}
		c.mu.Unlock()
		return nil, s.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.size == 0 && c.entries[k] == s {
		s.size = s.entry.bytes()
		c.used += s.size
	}
	for c.used > c.budget && len(c.entries) > 1 {
		oldest, at := -1, int64(math.MaxInt64)
		for j, o := range c.entries {
			if j != k && o.size > 0 && o.last < at {
				oldest, at = j, o.last
			}
		}
		if oldest < 0 {
			break
		}
		c.used -= c.entries[oldest].size
		delete(c.entries, oldest)
	}
	return s.entry, nil
}

// listNIfTI pairs DIR/images/STEM.nii[.gz] with DIR/masks/STEM.nii[.gz],
// or, as nnU-Net names a case of several modalities, the channels
// DIR/images/STEM_0000.nii.gz, STEM_0001.nii.gz, ... with
// DIR/masks/STEM.nii.gz; the cases sorted by name.
func listNIfTI(root string) ([]pair, []Problem) {
	imgDir, maskDir, probs := checkLayout(root, "data.source nifti reads DIR/images/*.nii[.gz] and DIR/masks/*.nii[.gz], a volume and its mask matched by name")
	if len(probs) > 0 {
		return nil, probs
	}
	exts := []string{".nii", ".gz"}
	list := func(dir string) (map[string]string, []string) {
		names, ps, err := readDirFiles(dir, exts)
		probs = append(probs, ps...)
		if err != nil {
			probs = append(probs, fatal(dir, "cannot list: %v", err))
		}
		byStem := map[string]string{}
		var stems []string
		for _, n := range names {
			if !IsNIfTIName(n) {
				probs = append(probs, warning(filepath.Join(dir, n), "ignored: not a .nii or .nii.gz file"))
				continue
			}
			s := niftiStem(n)
			if other, dup := byStem[s]; dup {
				probs = append(probs, fatal(filepath.Join(dir, n), "has the same name as %s; keep one", other))
				continue
			}
			byStem[s] = filepath.Join(dir, n)
			stems = append(stems, s)
		}
		return byStem, stems
	}
	images, stems := list(imgDir)
	masks, maskStems := list(maskDir)
	var pairs []pair
	cases := map[string][]string{} // nnU-Net's CASE_0000, CASE_0001, ...: the modality stems of a case
	for _, s := range stems {
		m, ok := masks[s]
		if !ok {
			if c, _, isModality := modalityOf(s); isModality && masks[c] != "" {
				cases[c] = append(cases[c], s)
				continue
			}
			probs = append(probs, fatal(images[s], "has no mask: looked for %s.nii or .nii.gz", filepath.Join(maskDir, s)))
			continue
		}
		pairs = append(pairs, pair{id: s, image: images[s], mask: m})
	}
	for _, c := range slices.Sorted(maps.Keys(cases)) {
		mods := cases[c]
		slices.SortFunc(mods, func(a, b string) int { _, i, _ := modalityOf(a); _, j, _ := modalityOf(b); return i - j })
		p := pair{id: c, mask: masks[c]}
		ok := true
		for k, m := range mods {
			if _, i, _ := modalityOf(m); i != k {
				probs = append(probs, fatal(images[mods[0]], "case %s has modalities %s but no %s_%04d: a case's channels are %s_0000, %s_0001, ... without gaps", c, strings.Join(mods, ", "), c, k, c, c))
				ok = false
				break
			}
			if k == 0 {
				p.image = images[m]
			} else {
				p.more = append(p.more, images[m])
			}
		}
		if ok {
			pairs = append(pairs, p)
		}
	}
	if len(cases) > 0 { // the cases among the single files, by name
		slices.SortFunc(pairs, func(a, b pair) int { return strings.Compare(a.id, b.id) })
	}
	for _, s := range maskStems {
		if _, ok := images[s]; !ok && len(cases[s]) == 0 {
			probs = append(probs, warning(masks[s], "has no volume (looked for %s.nii or .nii.gz, or %s_0000.nii.gz and the other modalities); ignored", filepath.Join(imgDir, s), filepath.Join(imgDir, s)))
		}
	}
	if n := len(pairs); n > 0 {
		for _, p := range pairs[1:] {
			if len(p.more) != len(pairs[0].more) {
				probs = append(probs, fatal(p.image, "case %s has %d modalities but %s has %d: every case needs the same channels", p.id, len(p.more)+1, pairs[0].id, len(pairs[0].more)+1))
				return nil, probs
			}
		}
	}
	if len(stems) == 0 {
		probs = append(probs, fatal(imgDir, "no volumes: the dataset is empty (looked for .nii and .nii.gz files)"))
	}
	return pairs, probs
}

// ModalityOf splits nnU-Net's modality stem CASE_NNNN (a file name
// without .nii or .nii.gz, e.g. "liver_003_0001") into the case and the
// channel ("liver_003", 1); ok is false for another name. It is how
// data.source nifti and predict tell a case's modalities.
func ModalityOf(stem string) (c string, channel int, ok bool) { return modalityOf(stem) }

// modalityOf is ModalityOf.
func modalityOf(stem string) (c string, channel int, ok bool) {
	i := len(stem) - 5
	if i < 1 || stem[i] != '_' {
		return "", 0, false
	}
	n, err := strconv.Atoi(stem[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return stem[:i], n, true
}

// scanVolume reads a volume pair in full: the slices' size, the mask's
// histogram and values per slice, the intensity window.
func scanVolume(cfg SourceConfig, p pair) (scanned, niftiVolume) {
	var s scanned
	v := niftiVolume{pair: p}
	img, err := ReadVolume(p.image, 0)
	if err != nil {
		s.err = err
		return s, v
	}
	m, err := ReadVolume(p.mask, 0)
	if err != nil {
		s.err = err
		return s, v
	}
	// Hashed just after the reads, from the page cache.
	for k, f := range []string{p.image, p.mask} {
		if s.sums[k], err = sumFile(f); err != nil {
			s.err = err
			return s, v
		}
	}
	v.dims = img.Dims
	v.maskBytes, v.imageBytes = int64(len(m.Voxels)), int64(len(img.Voxels))
	size, unit := img.Spacing()
	for a, sz := range size {
		if !(sz > 0) || math.IsInf(sz, 0) { // a header without spacing: voxel units
			size[a] = 1
		}
	}
	v.size = size
	v.spacing = strings.TrimSpace(fmt.Sprintf("%gx%gx%g %s", size[0], size[1], size[2], unit))
	ax := cfg.NIfTI.Axis
	s.imgH, s.imgW = img.SliceSize(ax)
	s.maskH, s.maskW = m.SliceSize(ax)
	s.imgBits, s.imgFormat = 16, img.Format()
	s.maskBits, s.maskFormat = 8, m.Format() // labels are read by value: no 8/16-bit confusion to warn of
	if m.Dims != img.Dims {
		s.err = fmt.Errorf("%s is %s voxels but its volume %s is %s; a mask volume must have its volume's dims", p.mask, joinDims(m.Dims[:]), p.image, joinDims(img.Dims[:]))
		return s, v
	}
	if s.imgH*s.imgW > cfg.MaxPixels {
		s.err = fmt.Errorf("%s: its slices across axis %d are %dx%d pixels, more than the %d memunet reads", p.image, ax, s.imgH, s.imgW, cfg.MaxPixels)
		return s, v
	}
	for ch, path := range p.channels() {
		if ch > 0 { // another modality: the case's dims, its own window
			if img, err = ReadVolume(path, 0); err != nil {
				s.err = err
				return s, v
			}
			if img.Dims != v.dims {
				s.err = fmt.Errorf("%s is %s voxels but %s is %s; a case's modalities must have one size", path, joinDims(img.Dims[:]), p.image, joinDims(v.dims[:]))
				return s, v
			}
			v.imageBytes = max(v.imageBytes, int64(len(img.Voxels)))
			sum, err := sumFile(path)
			if err != nil {
				s.err = err
				return s, v
			}
			s.more = append(s.more, sum)
		}
		st := newIntensityStats(cfg.NIfTI.Window)
		for k := range img.Len() {
			x := img.At(k)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				s.err = fmt.Errorf("%s: voxel (%d, %d, %d) is %g; an image volume must hold finite values", path, k%v.dims[0], k/v.dims[0]%v.dims[1], k/(v.dims[0]*v.dims[1]), x)
				return s, v
			}
			st.add(x)
		}
		in := st.intensity(cfg.NIfTI)
		if err := st.check(in); err != nil {
			s.err = fmt.Errorf("%s: %v", path, err)
			return s, v
		}
		v.in = append(v.in, in)
	}
	hist := map[uint16]int64{}
	n := img.Slices(ax)
	v.values = make([][]uint16, n)
	many := make([]bool, n)
	sh, sw := s.imgH, s.imgW
	for k := range n {
		for y := range sh {
			for x := range sw {
				idx := m.VoxelIndex(ax, k, y, x)
				raw, ok := MaskLabel(m.At(idx))
				if !ok {
					s.err = fmt.Errorf("%s: voxel (%d, %d, %d) holds %g, not a label; a mask holds whole numbers from 0 to %d",
						p.mask, idx%v.dims[0], idx/v.dims[0]%v.dims[1], idx/(v.dims[0]*v.dims[1]), m.At(idx), MaxMaskValue)
					return s, v
				}
				hist[raw]++
				if !many[k] && !slices.Contains(v.values[k], raw) {
					if len(v.values[k]) == maxSliceValues {
						many[k], v.values[k] = true, nil // more than Ignore and class 0's values: foreground
					} else {
						v.values[k] = append(v.values[k], raw)
					}
				}
			}
		}
	}
	for _, val := range slices.Sorted(maps.Keys(hist)) {
		s.hist = append(s.hist, valueCount{val, hist[val]})
	}
	return s, v
}

// openNIfTI lists and scans a nifti set, filling rep; it returns the
// source and the split (by volume: every slice of a volume trains, or
// every one validates), or nil after a fatal problem.
func openNIfTI(cfg SourceConfig, rep *Report) (*niftiSet, func(int) ([]int, []int), []stamp, string) {
	var pairs []pair
	var probs []Problem
	var part []int // each pair's folder: partTrain, partVal, partTest; nil for the flat layout
	stamps := []stamp{stampOf(filepath.Join(cfg.Path, "images")), stampOf(filepath.Join(cfg.Path, "masks"))}
	if dirs := splitFolders(cfg.Path); dirs != nil {
		rep.SplitFolders = true
		for k, d := range dirs {
			if _, err := os.Stat(d); err != nil && k > 0 {
				continue // no val/ or test/
			}
			ps, pr := listNIfTI(d)
			pairs, probs = append(pairs, ps...), append(probs, pr...)
			for range ps {
				part = append(part, k)
			}
			if k == partVal && len(ps) > 0 {
				probs = append(probs, cfg.foldsRefused(d, "its val/ folder", "move val/'s volumes into train/ to fold them all")...)
			}
			stamps = append(stamps, stampOf(filepath.Join(d, "images")), stampOf(filepath.Join(d, "masks")))
		}
	} else {
		pairs, probs = listNIfTI(cfg.Path)
	}
	rep.Problems = probs
	for _, p := range pairs {
		stamps = append(stamps, stampOf(p.image), stampOf(p.mask))
		for _, m := range p.more {
			stamps = append(stamps, stampOf(m))
		}
	}
	results := make([]scanned, len(pairs))
	vols := make([]niftiVolume, len(pairs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(pairs), 1)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(pairs); k = int(next.Add(1) - 1) {
				results[k], vols[k] = scanVolume(cfg, pairs[k])
			}
		})
	}
	wg.Wait()
	good := tally(cfg, pairs, results, rep)
	if good == nil {
		return nil, nil, stamps, ""
	}
	ns := &niftiSet{axis: cfg.NIfTI.Axis, classes: cfg.Classes, lut: slices.Clone(rep.Mapping), mapDesc: rep.MappingDesc,
		maxBytes: MaxDecodeBytes, cache: newVolumeCache(niftiCacheBytes), channels: 1 + len(pairs[0].more)}
	if ns.channels != cfg.Channels {
		what := "one image file a case"
		if ns.channels > 1 {
			what = fmt.Sprintf("%d modalities a case (%s_0000 .. %s_%04d)", ns.channels, pairs[0].id, pairs[0].id, ns.channels-1)
		}
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "has %s but model.in_channels is %d; set model.in_channels: %d", what, cfg.Channels, ns.channels))
		return nil, nil, stamps, ""
	}
	var fits bool
	if ns.h, ns.w, fits = commonSize(cfg, rep); !fits {
		return nil, nil, stamps, ""
	}
	var volSlices [][]int // the samples of each kept volume
	total := 0            // slices before skip_empty
	var kept []pair
	var sums [][2]fileSum
	moreSums := "" // the other modalities' bytes
	for k, v := range vols {
		if !good[k] {
			continue
		}
		var idx []int
		total += len(v.values)
		for z, vals := range v.values {
			if cfg.NIfTI.SkipEmpty && vals != nil && !slices.ContainsFunc(vals, func(r uint16) bool { c := ns.lut[r]; return c >= 0 && cfg.Background.Foreground(uint8(c)) }) {
				continue
			}
			idx = append(idx, len(ns.samples))
			ns.samples = append(ns.samples, niftiSample{vol: len(ns.vols), k: z})
		}
		if len(idx) == 0 {
			rep.Problems = append(rep.Problems, warning(v.mask, "has no slice with a class other than background across axis %d (data.nifti.skip_empty); the volume is left out", cfg.NIfTI.Axis))
			continue
		}
		ns.vols = append(ns.vols, v)
		if part != nil {
			ns.part = append(ns.part, part[k])
		}
		kept = append(kept, v.pair)
		sums = append(sums, results[k].sums)
		for _, m := range results[k].more {
			moreSums += fmt.Sprintf("|%x", m)
		}
		volSlices = append(volSlices, idx)
	}
	rep.Spacing = spacings(ns.vols)
	for _, v := range ns.vols {
		rep.MaxDepth = max(rep.MaxDepth, v.dims[2])
	}
	skipped := ""
	if cfg.NIfTI.SkipEmpty {
		skipped = fmt.Sprintf(", %d without foreground left out", total-len(ns.samples))
	}
	window := "each volume's own min..max"
	if w := cfg.NIfTI.Window; len(w) == 2 {
		window = fmt.Sprintf("data.nifti.window [%g, %g]", w[0], w[1])
	}
	ns.desc = fmt.Sprintf("nifti dataset %s (%d volumes, %d slices across axis %d%s)", cfg.Path, len(ns.vols), len(ns.samples), cfg.NIfTI.Axis, skipped)
	norm := "mapped to [0, 1] at 16 bits"
	if cfg.NIfTI.Normalize == NormalizeZScore {
		window = "each volume clipped to " + strings.TrimPrefix(window, "each volume's own ")
		norm = "at 16 bits, then z-scored by the volume's own mean and std (data.nifti.normalize: zscore)"
	}
	rep.Slicing = fmt.Sprintf("%d -> %d slices across axis %d (%s%s); intensities: %s %s",
		len(ns.vols), len(ns.samples), cfg.NIfTI.Axis, axisName[cfg.NIfTI.Axis], skipped, window, norm)
	rep.SliceSplit = cfg.Split == SplitSlices
	ns.volSlices = volSlices
	split := func(int) (train, val []int) {
		tv, vv, _ := ns.splitVolumes(cfg)
		if cfg.Split == SplitSlices { // every volume but the test folder's, in order
			return splitSlices(pick(volSlices, slices.Sorted(slices.Values(append(tv, vv...)))), cfg.ValFraction, cfg.Seed)
		}
		train, val = slices.Concat(pick(volSlices, tv)...), slices.Concat(pick(volSlices, vv)...)
		slices.Sort(train)
		slices.Sort(val)
		return train, val
	}
	if len(ns.vols) < 2 && cfg.Split != SplitSlices {
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "has %d usable volume(s); training needs at least 2, since a volume's slices all train or all validate; data.split: slices validates on a block of each volume's slices instead", len(ns.vols)))
		return nil, nil, stamps, ""
	}
	if n := foldable(ns.part, len(ns.vols)); cfg.Folds > n {
		rep.Problems = append(rep.Problems, fatal(cfg.Path, "data.folds: %d: the set has %d volumes to fold (whole, never by slice), fewer than the folds, and every fold validates at least one; use at most %d folds", cfg.Folds, n, n))
		return nil, nil, stamps, ""
	}
	slicing := fmt.Sprintf("|axis %d|skip %v|window %v", cfg.NIfTI.Axis, cfg.NIfTI.SkipEmpty, cfg.NIfTI.Window)
	if cfg.NIfTI.Normalize == NormalizeZScore {
		slicing += "|zscore"
	}
	sum := sha256.Sum256([]byte(fingerprintOf(cfg.Path, kept, ns.lut) + slicing))
	withBytes := sha256.Sum256([]byte(contentsOf(cfg.Path, kept, sums, ns.lut) + slicing + moreSums))
	ns.contents = hex.EncodeToString(withBytes[:])
	return ns, split, stamps, hex.EncodeToString(sum[:])
}

// Parts of a nifti set laid out in train/ val/ test/ folders.
const (
	partTrain = iota
	partVal
	partTest
)

// splitVolumes divides the kept volumes: by their folders where the set
// has train/ val/ test/ (val by data.val_fraction of train/ where there is
// no val/), else by data.val_fraction and data.seed; each part ascending.
func (ns *niftiSet) splitVolumes(cfg SourceConfig) (train, val, test []int) {
	if ns.part == nil {
		train, val = cfg.RandomSplit(len(ns.vols))
		return train, val, nil
	}
	for k, p := range ns.part {
		switch p {
		case partTrain:
			train = append(train, k)
		case partVal:
			val = append(val, k)
		case partTest:
			test = append(test, k)
		}
	}
	if len(val) == 0 {
		tv, vv := cfg.RandomSplit(len(train))
		train, val = pick(train, tv), pick(train, vv)
	}
	slices.Sort(train)
	slices.Sort(val)
	return train, val, test
}

// foldable is how many of n volumes split at random (data.folds folds
// them): all, or where the set has train/ val/ test/ folders, train/'s.
func foldable(part []int, n int) int {
	if part == nil {
		return n
	}
	k := 0
	for _, p := range part {
		if p == partTrain {
			k++
		}
	}
	return k
}

// pick is xs at the indices idx.
func pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, k := range idx {
		out[i] = xs[k]
	}
	return out
}

// splitSlices is data.split: slices: of each volume's slices (its samples
// in z order), a contiguous block of valFraction of them (at least one) at
// a place drawn from (seed, volume) validates, the slice on each side of
// the block is left out, and the rest trains.
func splitSlices(volSlices [][]int, valFraction float64, seed uint64) (train, val []int) {
	for k, idx := range volSlices {
		n := len(idx)
		nv := max(1, int(math.Round(float64(n)*valFraction)))
		if n < nv+2 { // no room for a guard and a training slice
			train = append(train, idx...)
			continue
		}
		start := newRand(seed^0x736c6963, uint64(k)).IntN(n - nv + 1)
		val = append(val, idx[start:start+nv]...)
		for j, i := range idx {
			if j < start-1 || j > start+nv {
				train = append(train, i)
			}
		}
	}
	slices.Sort(train)
	slices.Sort(val)
	return train, val
}

// spacings words the volumes' voxel sizes: "1x1x1 mm", or the distinct
// ones with their counts, most frequent first, where they differ (memunet
// does not resample: a model sees voxels, whatever their size).
func spacings(vols []niftiVolume) string {
	count := map[string]int{}
	for _, v := range vols {
		count[v.spacing]++
	}
	kinds := slices.SortedFunc(maps.Keys(count), func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	if len(kinds) == 1 {
		return kinds[0] + " (x, y, z)"
	}
	parts := make([]string, len(kinds))
	for k, s := range kinds {
		parts[k] = fmt.Sprintf("%s: %d", s, count[s])
	}
	return fmt.Sprintf("%d spacings (x, y, z: volumes): %s; memunet does not resample, so a model sees voxels of each size", len(kinds), strings.Join(parts, ", "))
}

// niftiSliceSize is the slice size of the first volume of a nifti set, for
// ProbeSize.
func niftiSliceSize(cfg SourceConfig) (h, w int, err error) {
	v, err := firstVolume(cfg)
	if err != nil {
		return 0, 0, err
	}
	h, w = v.SliceSize(cfg.NIfTI.Axis)
	return h, w, nil
}

// firstVolume reads the first volume of a nifti set, for its size.
func firstVolume(cfg SourceConfig) (*Volume, error) {
	pairs, probs := listNIfTI(cfg.Path)
	if len(pairs) == 0 {
		if len(probs) > 0 {
			return nil, fmt.Errorf("data: %w", probs[0])
		}
		return nil, fmt.Errorf("data: %s: no volumes", cfg.Path)
	}
	return ReadVolume(pairs[0].image, 0)
}

// niftiSource is data.source nifti: volumes read as slices.
type niftiSource struct{}

func (niftiSource) open(_ context.Context, cfg SourceConfig, rep *Report, _ bool) (found, error) {
	ns, split, stamps, files := openNIfTI(cfg, rep)
	if ns == nil {
		return found{stamps: stamps}, nil
	}
	if !cfg.Volumes() {
		if ns.channels > 1 && (len(cfg.Patch) != 0 || len(cfg.Resize) != 0 || (cfg.Scale != 0 && cfg.Scale != 1)) {
			rep.Problems = append(rep.Problems, fatal(cfg.Path, "has %d modalities a case, and data.patch, data.resize and data.scale take one channel of a slice; leave them out (whole slices), or train a 3D UNet (model.dims: 3) on data.patch [D, H, W]", ns.channels))
			return found{stamps: stamps}, nil
		}
		_, _, tv := ns.splitVolumes(cfg)
		test := slices.Concat(pick(ns.volSlices, tv)...)
		rep.Test = len(test)
		return found{src: ns, split: split, test: test, stamps: stamps, files: files, contents: ns.contents}, nil
	}
	nv := newNIfTIVolumes(cfg, ns, rep)
	if nv == nil {
		return found{stamps: stamps}, nil
	}
	how := "whole"
	if p := cfg.Patch; len(p) == 3 {
		how = "in patches"
		rep.Patched = fmt.Sprintf("data.patch [%d, %d, %d]: random crops at full resolution, %.0f%% centred on foreground (data.patch_foreground), padded where a volume is smaller; validation on each volume's centre patch",
			p[0], p[1], p[2], 100*cfg.PatchForeground)
	}
	rep.Slicing = fmt.Sprintf("%d volumes read %s as %dx%dx%d (z, y, x) for a 3D UNet; %s", nv.Len(), how, nv.d, nv.h, nv.w, rep.Slicing[strings.Index(rep.Slicing, "intensities:"):])
	_, _, test := ns.splitVolumes(cfg)
	rep.Test = len(test)
	split3 := func(int) (train, val []int) { train, val, _ = ns.splitVolumes(cfg); return train, val }
	return found{src: nv, split: split3, test: test, stamps: stamps, files: files, contents: ns.contents}, nil
}
