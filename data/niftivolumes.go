package data

import (
	"fmt"
	"image"
	"math/rand/v2"
	"sync"
)

// niftiVolumes is data.source nifti with model.dims 3: sample i is volume
// i, read whole (data.patch empty: every volume the same size) or as a
// D x H x W patch (data.patch [D, H, W]) with D along z, H along y and W
// along x, held as stacked slices (see Volumes). Intensities are windowed
// and kept at 16 bits as the slices' are (niftiSet.load). For training
// (sampleEpoch) a patch is drawn from (seed, epoch, i): with probability
// fg centred on a foreground voxel (a class other than data.background and Ignore drawn
// uniformly among those the volume holds, then one of its voxels, as
// nnU-Net oversamples), else anywhere; Sample is the centre patch. A side
// of the volume smaller than the patch is padded (centred; image value 0
// after normalization, mask Ignore).
type niftiVolumes struct {
	set     *niftiSet
	d, h, w int
	fg      float64
	bg      Background // what foreground is not (data.background)
	// where holds, per volume, each class's voxel indices (a subsample of
	// at most maxForegroundVoxels), made on the volume's first patch.
	mu    sync.Mutex
	where map[int]*classVoxels
}

// maxForegroundVoxels bounds the voxels remembered per class and volume
// for foreground sampling (nnU-Net keeps 10,000).
const maxForegroundVoxels = 10000

// classVoxels lists, per class, voxels that hold it.
type classVoxels struct {
	once    sync.Once
	byClass [256][]int32
}

var (
	_ ImageSource  = (*niftiVolumes)(nil)
	_ epochSampler = (*niftiVolumes)(nil)
	_ Volumes      = (*niftiVolumes)(nil)
)

// HeldBytes is its set's (niftiSet.HeldBytes).
func (n *niftiVolumes) HeldBytes(workers int) int64 { return n.set.HeldBytes(workers) }

func (n *niftiVolumes) Len() int         { return len(n.set.vols) }
func (n *niftiVolumes) Channels() int    { return n.set.channels }
func (n *niftiVolumes) Classes() int     { return n.set.classes }
func (n *niftiVolumes) Size() (h, w int) { return n.d * n.h, n.w }
func (n *niftiVolumes) Depth() int       { return n.d }
func (n *niftiVolumes) Name(i int) string {
	if i < 0 || i >= n.Len() {
		return ""
	}
	return n.set.vols[i].id
}
func (n *niftiVolumes) String() string {
	return fmt.Sprintf("%s as %dx%dx%d volumes", n.set.desc, n.d, n.h, n.w)
}

func (n *niftiVolumes) caseOf(i int) Case {
	v := &n.set.vols[i]
	return Case{Name: v.id, Depth: 1, Spacing: v.size}
}

// Sample fills image and mask with volume i's centre patch.
func (n *niftiVolumes) Sample(i int, img []float32, mask []uint8) error {
	return n.patch(i, nil, img, mask)
}

func (n *niftiVolumes) sampleEpoch(i int, seed uint64, epoch int, img []float32, mask []uint8) error {
	return n.patch(i, patchRand(seed, epoch, i), img, mask)
}

// Image is volume i's centre patch, its slices stacked, at 8 bits (its
// first channel).
func (n *niftiVolumes) Image(i int) (*image.RGBA, *image.Gray, error) {
	h, w := n.Size()
	img, mask := make([]float32, n.Channels()*h*w), make([]uint8, h*w)
	if err := n.Sample(i, img, mask); err != nil {
		return nil, nil, err
	}
	pic, m := image.NewRGBA(image.Rect(0, 0, w, h)), image.NewGray(image.Rect(0, 0, w, h))
	for p, v := range img[:h*w] {
		g := to8(Denormalize(v))
		pic.Pix[4*p], pic.Pix[4*p+1], pic.Pix[4*p+2], pic.Pix[4*p+3] = g, g, g, 255
	}
	copy(m.Pix, mask)
	return pic, m, nil
}

// patch cuts volume i's patch: the centre one without rng, else a drawn one.
func (n *niftiVolumes) patch(i int, rng *rand.Rand, img []float32, mask []uint8) error {
	if err := checkSample(n, i, img, mask); err != nil {
		return err
	}
	v := &n.set.vols[i]
	e, err := n.set.cache.get(i, func() (*volumeEntry, error) { return n.set.load(v) })
	if err != nil {
		return err
	}
	X, Y, Z := v.dims[0], v.dims[1], v.dims[2]
	voxels, out := X*Y*Z, n.d*n.h*n.w
	size, side := [3]int{Z, Y, X}, [3]int{n.d, n.h, n.w}
	var origin [3]int
	for a := range 3 {
		origin[a] = (size[a] - side[a]) / 2
	}
	if rng != nil {
		origin = n.origin(rng, i, e, size, side)
	}
	// Each channel's z-score map (Intensity.Affine), once a patch.
	as, bs := make([]float32, len(v.in)), make([]float32, len(v.in))
	for ch, in := range v.in {
		as[ch], bs[ch] = in.Affine()
	}
	for z := range n.d {
		for y := range n.h {
			for x := range n.w {
				p := (z*n.h+y)*n.w + x
				sz, sy, sx := origin[0]+z, origin[1]+y, origin[2]+x
				if sz < 0 || sz >= Z || sy < 0 || sy >= Y || sx < 0 || sx >= X {
					for ch := range v.in {
						img[ch*out+p] = 0
					}
					mask[p] = Ignore
					continue
				}
				k := (sz*Y+sy)*X + sx
				for ch, in := range v.in {
					x := (float32(e.img[ch*voxels+k])/65535 - Mean) / Std
					if in.ZScore {
						x = x*as[ch] + bs[ch]
					}
					img[ch*out+p] = x
				}
				mask[p] = e.cls[k]
			}
		}
	}
	return nil
}

// origin draws a patch's corner (z, y, x) in volume i (see niftiVolumes).
func (n *niftiVolumes) origin(rng *rand.Rand, i int, e *volumeEntry, size, side [3]int) (o [3]int) {
	var lo, hi [3]int
	for a := range 3 {
		lo[a], hi[a] = cornerRange(size[a], side[a])
	}
	if rng.Float64() < n.fg {
		if c, ok := n.foregroundVoxel(rng, i, e, size); ok {
			for a := range 3 {
				o[a] = min(max(c[a]-side[a]/2, lo[a]), hi[a])
			}
			return o
		}
	}
	for a := range 3 {
		o[a] = lo[a] + rng.IntN(hi[a]-lo[a]+1)
	}
	return o
}

// foregroundVoxel draws a class other than the background and Ignore uniformly among
// those volume i holds, then one of its (remembered) voxels; ok is false
// when it holds none.
func (n *niftiVolumes) foregroundVoxel(rng *rand.Rand, i int, e *volumeEntry, size [3]int) (c [3]int, ok bool) {
	n.mu.Lock()
	cv := n.where[i]
	if cv == nil {
		cv = &classVoxels{}
		n.where[i] = cv
	}
	n.mu.Unlock()
	cv.once.Do(func() { cv.byClass = voxelsByClass(e.cls) })
	var classes []int
	for k := range 256 {
		if len(cv.byClass[k]) > 0 && n.bg.Foreground(uint8(k)) {
			classes = append(classes, k)
		}
	}
	if len(classes) == 0 {
		return c, false
	}
	vox := cv.byClass[classes[rng.IntN(len(classes))]]
	k := int(vox[rng.IntN(len(vox))])
	X, Y := size[2], size[1]
	return [3]int{k / (X * Y), k / X % Y, k % X}, true
}

// voxelsByClass lists each class's voxels, every stride-th of a class with
// more than maxForegroundVoxels so that at most that many are kept.
func voxelsByClass(cls []uint8) (out [256][]int32) {
	var count [256]int
	for _, c := range cls {
		count[c]++
	}
	var seen [256]int
	for k, c := range cls {
		stride := (count[c] + maxForegroundVoxels - 1) / maxForegroundVoxels
		if seen[c]%stride == 0 {
			out[c] = append(out[c], int32(k))
		}
		seen[c]++
	}
	return out
}

// newNIfTIVolumes makes the 3D set of a scanned nifti set: the patch of
// data.patch, or the volumes' common size, each side a multiple of the
// model's reduction on its axis. It reports a fatal problem in rep and
// returns nil where the volumes cannot make one.
func newNIfTIVolumes(cfg SourceConfig, ns *niftiSet, rep *Report) *niftiVolumes {
	nv := &niftiVolumes{set: ns, fg: cfg.PatchForeground, bg: cfg.Background, where: map[int]*classVoxels{}}
	if p := cfg.Patch; len(p) == 3 {
		nv.d, nv.h, nv.w = p[0], p[1], p[2]
		return nv
	}
	first := ns.vols[0]
	for _, v := range ns.vols[1:] {
		if v.dims != first.dims {
			rep.Problems = append(rep.Problems, fatal(v.image, "is %s voxels but %s is %s: whole volumes train only when all have one size; set data.patch: [D, H, W] to train on patches",
				joinDims(v.dims[:]), first.image, joinDims(first.dims[:])))
			return nil
		}
	}
	nv.d, nv.h, nv.w = first.dims[2], first.dims[1], first.dims[0]
	fd, fh := max(cfg.DepthMultiple, 1), max(cfg.SizeMultiple, 1)
	if nv.d%fd != 0 || nv.h%fh != 0 || nv.w%fh != 0 {
		rep.Problems = append(rep.Problems, fatal(first.image, "is %dx%dx%d voxels (z, y, x), not divisible by the poolings' %dx%dx%d; set data.patch: [D, H, W] with sides of such multiples, or lower model.depth",
			nv.d, nv.h, nv.w, fd, fh, fh))
		return nil
	}
	return nv
}
