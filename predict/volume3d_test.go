package predict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/internal/childtest"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/tiles"
)

// tiny3D is a 3D UNet of base 2 and depth 1 over 1-channel volumes, of
// classes classes, windowed by size^3 (data.size), weights drawn from
// seed.
func tiny3D(t testing.TB, classes, size int, seed uint64) *Predictor {
	t.Helper()
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes, cfg.Model.InChannels, cfg.Model.Dims = 2, 1, classes, 1, 3
	cfg.Model.Seed = seed
	cfg.Data.Size = size
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestPredictVolume3DGeometry: a 3D UNet's mask of a NIfTI volume has
// the volume's header geometry byte for byte (dims, pixdim, units, qform,
// sform), its compression and byte order, one label per voxel (the
// checkpoint's mask values where it has them, 16 bits where one passes
// 255); volumes smaller than the window (7x6x5, padded) and larger
// (37x29x45, 60 windows).
func TestPredictVolume3DGeometry(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.nii.gz")
	writeVolume(t, big, 37, 29, 45)
	for _, tc := range []struct {
		in     string
		values []int
	}{
		{filepath.Join("..", "data", "testdata", "nifti", "int16.nii.gz"), nil},
		{filepath.Join("..", "data", "testdata", "nifti", "uint16_be.nii"), []int{0, 300, 7}},
		{big, []int{0, 1, 2}},
	} {
		p := tiny3D(t, 3, 16, 1)
		if tc.values != nil {
			p.Checkpoint = &checkpoint.Checkpoint{Manifest: checkpoint.Manifest{MaskValues: tc.values}}
		}
		out := t.TempDir()
		var note bytes.Buffer
		rep, err := p.Run(tc.in, out, Options{Blend: tiles.Gaussian, Overlap: 0.5}, Limits{}, &note)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(tc.in)
		if len(rep.Outputs) != 1 || rep.Outputs[0].Mask != name || rep.Outputs[0].Volume == nil || rep.Outputs[0].Tiling != nil || rep.PlannedRSSBytes == 0 {
			t.Fatalf("outputs %+v", rep.Outputs)
		}
		src, err := data.ReadVolume(tc.in, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := data.ReadVolume(filepath.Join(out, name), 0)
		if err != nil {
			t.Fatal(err)
		}
		typ := "uint8"
		if tc.values != nil && tc.values[1] > 255 {
			typ = "uint16"
		}
		if !bytes.Equal(got.Geometry(), src.Geometry()) || got.Gzip != src.Gzip || got.Order != src.Order || got.TypeName() != typ {
			t.Errorf("%s: the mask's geometry or kind differs (gzip %v, %s)", name, got.Gzip, got.TypeName())
		}
		allowed := map[float64]bool{0: true, 1: true, 2: true}
		if tc.values != nil {
			allowed = map[float64]bool{}
			for _, v := range tc.values {
				allowed[float64(v)] = true
			}
		}
		for k := range got.Len() {
			if !allowed[got.At(k)] {
				t.Fatalf("%s: voxel %d: label %g", name, k, got.At(k))
			}
		}
		if !strings.Contains(note.String(), "windows of 16x16x16, overlap 0.5, gaussian blend") {
			t.Errorf("note: %s", note.String())
		}
	}
}

// TestPredictVolume3DRefuses: what a 3D UNet cannot predict is refused
// before anything is written: an image file, flip averaging, overlays;
// references with a 2D model or a dataset split.
func TestPredictVolume3DRefuses(t *testing.T) {
	p := tiny3D(t, 2, 16, 1)
	vol := filepath.Join("..", "data", "testdata", "nifti", "int16.nii.gz")
	img := filepath.Join(t.TempDir(), "a.png")
	writeImage(t, img, 16, 16)
	for _, tc := range []struct {
		input string
		opts  Options
		want  string
	}{
		{img, Options{}, "a 3D UNet (model.dims 3) predicts NIfTI volumes"},
		{vol, Options{TTA: true}, "--tta"},
		{vol, Options{Overlay: true}, "--overlay and --probs apply to image files"},
		{vol, Options{Tile: "0"}, "--tile \"0\""},
		{vol, Options{References: filepath.Join(t.TempDir(), "none")}, "--references"},
		{"dataset:val", Options{References: vol}, "scored by its dataset's own masks"},
	} {
		if _, err := p.Run(tc.input, t.TempDir(), tc.opts, Limits{}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v, want %q", tc.input, tc.opts, err, tc.want)
		}
	}
	p2 := tinyPredictor(t, 1)
	if _, err := p2.Run(vol, t.TempDir(), Options{References: vol}, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "this checkpoint's model is 2D") {
		t.Errorf("references with a 2D model: %v", err)
	}
	for _, tc := range []struct {
		lim  Limits
		want string
	}{
		{Limits{Available: 1 << 20}, "give a smaller window (--tile N), crop or resample the volume or free memory"},
		{Limits{Available: 1 << 20, Capacity: 1 << 40}, "give a smaller window (--tile N), crop or resample the volume or free memory"},
		{Limits{Capacity: 1 << 10}, "give a smaller window (--tile N), raise --capacity or free memory"},
	} {
		if _, err := p.Run(vol, t.TempDir(), Options{Blend: tiles.Gaussian}, tc.lim, nil); err == nil || !strings.Contains(err.Error(), vol) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a plan past %+v: %v, want %q", tc.lim, err, tc.want)
		}
	}
}

// reflectWalk maps i onto [0, n) by reflection about the ends, the ends not
// repeated (the test's own, by walking).
func reflectWalk(i, n int) int {
	for i < 0 || i >= n {
		if i < 0 {
			i = -i
		}
		if i >= n {
			i = 2*(n-1) - i
		}
		if n == 1 {
			return 0
		}
	}
	return i
}

// gaussian1 is the 1D weight of a window of side voxels, sigma side/8,
// 1 at the centre; 1 everywhere for a constant blend.
func gaussian1(side int, blend string) []float64 {
	g := make([]float64, side)
	sigma := float64(side) / 8
	c := float64(side/2) + 0.5 - float64(side)/2
	for i := range g {
		g[i] = 1
		if blend == tiles.Gaussian {
			d := float64(i) + 0.5 - float64(side)/2
			g[i] = math.Exp(-d*d/(2*sigma*sigma)) / math.Exp(-c*c/(2*sigma*sigma))
		}
	}
	return g
}

// wholeVolume3D is the reference of a streamed prediction: the volume read
// whole (data.ReadVolume), each window cut from slices prepared as the 2D
// path prepares them (SlicePicture, then data.Window reflecting in the
// plane), z reflected, its logits (an ensemble's mean probabilities)
// weighed in float64 and divided by the weights' sum per voxel: the
// classes, and each voxel's margin between its two largest blended
// outputs. paths are one volume, given to every
// channel, or a case's modalities, channel ch read from paths[ch] and
// windowed (or z-scored) by its own intensities.
func wholeVolume3D(t *testing.T, p *Predictor, paths []string, side int, overlap float64, blend string) ([]uint8, []float64) {
	t.Helper()
	k, ch := p.Config.Model.Classes, p.Config.Model.InChannels
	a, b, err := data.NormCoefficients(p.Config.Data.Mean, p.Config.Data.Std, ch)
	if err != nil {
		t.Fatal(err)
	}
	if a == nil {
		a, b = slices.Repeat([]float32{1}, ch), make([]float32, ch)
	}
	var X, Y, Z int
	pics := make([][]image.Image, len(paths)) // volume i's z-slices
	for i, path := range paths {
		v, err := data.ReadVolume(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		X, Y, Z = v.Dims[0], v.Dims[1], v.Dims[2]
		norm, _ := v.Intensity(p.Config.Data.NIfTI)
		for c := range ch {
			if min(c, len(paths)-1) == i && norm.ZScore {
				a[c], b[c] = norm.Affine()
			}
		}
		for z := range Z {
			pics[i] = append(pics[i], v.SlicePicture(2, z, norm.Lo, norm.Hi))
		}
	}
	plane, err := tiles.New(Y, X, side, overlap)
	if err != nil {
		t.Fatal(err)
	}
	deep, _ := tiles.New(Z, 1, side, overlap)
	g := gaussian1(side, blend)
	acc := make([]float64, k*Z*Y*X)
	wsum := make([]float64, Z*Y*X)
	tt := side * side
	win := make([]float32, ch*side*tt)
	planes := make([]float32, tt)
	logits, mean := make([]float32, k*side*tt), make([]float32, k*side*tt)
	for iz := range deep.Rows {
		oz, _ := deep.Origin(iz * deep.Cols)
		for tile := range plane.Count() {
			oy, ox := plane.Origin(tile)
			for dz := range side {
				for c := range ch {
					pic := pics[min(c, len(paths)-1)][reflectWalk(oz+dz, Z)]
					data.Window(pic, 1, oy, ox, side, side, a[c:c+1], b[c:c+1], true, planes)
					copy(win[(c*side+dz)*tt:(c*side+dz+1)*tt], planes[:tt])
				}
			}
			out, err := p.windowOutputs(logits, mean, win, side, side, side) // an ensemble's mean probabilities
			if err != nil {
				t.Fatal(err)
			}
			for dz := range side {
				for dy := range side {
					for dx := range side {
						z, y, x := oz+dz, oy+dy, ox+dx
						if z < 0 || z >= Z || y < 0 || y >= Y || x < 0 || x >= X {
							continue
						}
						w := g[dz] * g[dy] * g[dx]
						at := (z*Y+y)*X + x
						wsum[at] += w
						for c := range k {
							acc[c*Z*Y*X+at] += w * float64(out[((c*side+dz)*side+dy)*side+dx])
						}
					}
				}
			}
		}
	}
	classes := make([]uint8, Z*Y*X)
	margin := make([]float64, Z*Y*X)
	for at := range classes {
		best, second := 0, -1
		for c := 1; c < k; c++ {
			if acc[c*Z*Y*X+at] > acc[best*Z*Y*X+at] {
				best, second = c, best
			} else if second < 0 || acc[c*Z*Y*X+at] > acc[second*Z*Y*X+at] {
				second = c
			}
		}
		classes[at] = uint8(best)
		margin[at] = (acc[best*Z*Y*X+at] - acc[second*Z*Y*X+at]) / wsum[at]
	}
	return classes, margin
}

// TestPredictVolume3DBlending: the streamed prediction (slab by slab,
// float32 weighted sums, the volume never whole) gives the classes of the
// whole-volume reference (wholeVolume3D) at every voxel whose two
// largest blended logits are apart by more than float32 rounding: sides
// not multiples of the window or its stride, a depth shorter than the
// window (padded by reflection), Gaussian and constant blends, the
// volume's min and max or data.nifti.window, data.mean and data.std, and
// a model of three channels (the gray volume in each, normalized by each
// channel's mean and std).
func TestPredictVolume3DBlending(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		x, y, z   int
		overlap   float64
		blend     string
		window    []float64
		mean, std []float64
		channels  int
		zscore    bool
	}{
		{37, 29, 45, 0.5, tiles.Gaussian, nil, nil, nil, 1, false},
		{20, 18, 6, 0.25, tiles.Constant, []float64{-500, 1500}, []float64{0.3}, []float64{0.2}, 1, false},
		{33, 17, 40, 0.3, tiles.Gaussian, nil, []float64{0.45}, []float64{0.3}, 1, false},
		{26, 19, 21, 0.5, tiles.Gaussian, nil, []float64{0.4, 0.5, 0.6}, []float64{0.2, 0.25, 0.3}, 3, false},
		{31, 22, 19, 0.5, tiles.Gaussian, nil, nil, nil, 1, true},
		{23, 20, 17, 0.25, tiles.Gaussian, []float64{-200, 900}, nil, nil, 1, true},
	} {
		p := tiny3D(t, 3, 16, 3)
		if tc.channels != 1 {
			p.Close()
			p.Config.Model.InChannels = tc.channels
			var err error
			if p, err = newPredictor(p.Config, cpu.New(), backend.Float32, 0, 1); err != nil {
				t.Fatal(err)
			}
			defer p.Close()
		}
		p.Config.Data.NIfTI.Window, p.Config.Data.Mean, p.Config.Data.Std = tc.window, tc.mean, tc.std
		p.Config.Data.NIfTI.Normalize = data.NormalizeWindow
		if tc.zscore {
			p.Config.Data.NIfTI.Normalize = data.NormalizeZScore
		}
		in := filepath.Join(dir, "v.nii.gz")
		writeVolume(t, in, tc.x, tc.y, tc.z)
		out := t.TempDir()
		if _, err := p.Run(in, out, Options{Blend: tc.blend, Overlap: tc.overlap}, Limits{}, nil); err != nil {
			t.Fatal(err)
		}
		got, err := data.ReadVolume(filepath.Join(out, "v.nii.gz"), 0)
		if err != nil {
			t.Fatal(err)
		}
		want, margin := wholeVolume3D(t, p, []string{in}, 16, tc.overlap, tc.blend)
		seen := map[uint8]int{}
		close := 0
		for at, c := range want {
			seen[c]++
			if float64(c) == got.At(at) {
				continue
			}
			if margin[at] > 1e-4 {
				t.Fatalf("%dx%dx%d: voxel %d is class %g, the whole-volume reference %d (margin %.3g)", tc.x, tc.y, tc.z, at, got.At(at), c, margin[at])
			}
			close++
		}
		if len(seen) < 2 || close > len(want)/1000 {
			t.Errorf("%dx%dx%d: classes %v, %d near ties differ", tc.x, tc.y, tc.z, seen, close)
		}
		t.Logf("%dx%dx%d: classes %v, %d near ties differ", tc.x, tc.y, tc.z, seen, close)
	}
}

// TestVolumePlanGrowsWithTheSlab: a volume's plan is its slab's: the
// same in-plane size at 2x and 8x the depth plans the same host bytes
// and pool peak, while 2x the height and width plans about 4x the slab.
func TestVolumePlanGrowsWithTheSlab(t *testing.T) {
	p := tiny3D(t, 2, 32, 1)
	plan := func(x, y, z int) Need {
		nd, _, err := p.planVolume([3]int{x, y, z}, [3]int{32, 32, 32}, 0.5, 1, int64(2*x*y), 0, false)
		if err != nil {
			t.Fatal(err)
		}
		return nd
	}
	base := plan(128, 128, 128)
	for _, z := range []int{256, 1024} {
		if nd := plan(128, 128, z); nd != (Need{N: 1, H: 32, W: 32, PeakAllocated: base.PeakAllocated, PeakReserved: base.PeakReserved, Host: base.Host}) {
			t.Errorf("depth %d plans %+v, depth 128 %+v", z, nd, base)
		}
	}
	wide := plan(256, 256, 128)
	if r := float64(wide.Host-gcSlack(wide.Host)) / float64(base.Host-gcSlack(base.Host)); r < 3 || r > 4.1 {
		t.Errorf("2x the height and width plans %.2fx the host bytes", r)
	}
	// The slab: 32 z-slices of 2 classes' sums and 32 of 16-bit input,
	// 128x128.
	slab := int64(32*2*128*128*4 + 32*128*128*2)
	if base.Host < slab || base.Host > slab+8<<20 {
		t.Errorf("host %d for a slab of %d", base.Host, slab)
	}
}

// TestPredictVolume3DScores: with --references, each volume's Dice per
// class (null for a class in neither), their means with and without
// background, and the means over the volumes are those of the voxel
// counts; a reference is found by the volume's name or its stem without
// nnU-Net's _0000, and one of other dims or with a value that is no
// class's is refused.
func TestPredictVolume3DScores(t *testing.T) {
	dir := t.TempDir()
	vols, refs := filepath.Join(dir, "vols"), filepath.Join(dir, "refs")
	os.Mkdir(vols, 0o755)
	os.Mkdir(refs, 0o755)
	writeVolume(t, filepath.Join(vols, "a_0000.nii.gz"), 20, 18, 24)
	writeVolume(t, filepath.Join(vols, "b.nii.gz"), 17, 21, 19)
	p := tiny3D(t, 3, 16, 3)
	first := filepath.Join(dir, "first")
	if _, err := p.Run(vols, first, Options{Blend: tiles.Gaussian, Overlap: 0.25}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	// a's reference is its prediction with every fifth voxel moved to the
	// next class and every seventh not counted; b's is its prediction.
	counts := map[string][][3]int64{}
	for _, name := range []string{"a_0000.nii.gz", "b.nii.gz"} {
		pred, err := data.ReadVolume(filepath.Join(first, name), 0)
		if err != nil {
			t.Fatal(err)
		}
		labels := make([]uint16, pred.Len())
		c := make([][3]int64, 3) // tp, fp, fn
		for k := range labels {
			pc := int(pred.At(k))
			rc := pc
			if name == "a_0000.nii.gz" && k%5 == 0 {
				rc = (pc + 1) % 3
			}
			labels[k] = uint16(rc)
			if name == "a_0000.nii.gz" && k%7 == 0 {
				labels[k] = 255
				continue
			}
			if rc == pc {
				c[pc][0]++
			} else {
				c[pc][1]++
				c[rc][2]++
			}
		}
		counts[name] = c
		refName := name
		if name == "a_0000.nii.gz" {
			refName = "a.nii.gz"
		}
		f, err := os.Create(filepath.Join(refs, refName))
		if err != nil {
			t.Fatal(err)
		}
		if err := data.WriteMaskVolume(f, pred, labels, true); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	out := filepath.Join(dir, "scored")
	rep, err := p.Run(vols, out, Options{Blend: tiles.Gaussian, Overlap: 0.25, References: refs}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var means [2][]float64
	perClass := make([][]float64, 3)
	for _, o := range rep.Outputs {
		s := o.Score
		c := counts[filepath.Base(o.Input)]
		if s == nil || len(s.Dice) != 3 {
			t.Fatalf("%s: score %+v", o.Input, s)
		}
		var all, fg []float64
		for k, n := range c {
			if n[0]+n[1]+n[2] == 0 {
				if s.Dice[k] != nil {
					t.Errorf("%s class %d: dice %g for a class in neither", o.Input, k, *s.Dice[k])
				}
				continue
			}
			want := float64(2*n[0]) / float64(2*n[0]+n[1]+n[2])
			if s.Dice[k] == nil || math.Abs(*s.Dice[k]-want) > 1e-12 {
				t.Errorf("%s class %d: dice %v, want %g", o.Input, k, s.Dice[k], want)
			}
			all = append(all, want)
			perClass[k] = append(perClass[k], want)
			if k > 0 {
				fg = append(fg, want)
			}
		}
		if *s.MeanDice != *mean(all) || (len(fg) > 0) != (s.MeanDiceForeground != nil) {
			t.Errorf("%s: means %v %v, want %v %v", o.Input, *s.MeanDice, s.MeanDiceForeground, all, fg)
		}
		means[0] = append(means[0], *s.MeanDice)
		if s.MeanDiceForeground != nil {
			means[1] = append(means[1], *s.MeanDiceForeground)
		}
		if strings.HasPrefix(filepath.Base(o.Input), "b") && *s.MeanDice != 1 {
			t.Errorf("b against its own prediction: %v", *s.MeanDice)
		}
	}
	vs := rep.VolumeScores
	if vs == nil || vs.Volumes != 2 || *vs.MeanDice != *mean(means[0]) || *vs.MeanDiceForeground != *mean(means[1]) {
		t.Fatalf("volume scores %+v", vs)
	}
	for k, d := range vs.Dice {
		if (d == nil) != (len(perClass[k]) == 0) || d != nil && *d != *mean(perClass[k]) {
			t.Errorf("class %d: mean dice %v, want the mean of %v", k, d, perClass[k])
		}
	}
	js, _ := os.ReadFile(filepath.Join(out, runfiles.PredictReport))
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || back.VolumeScores == nil || back.Outputs[0].Score == nil {
		t.Errorf("predict.json: %v %s", err, js)
	}
	// A reference of other dims, and one holding no class's value.
	bad := filepath.Join(dir, "bad")
	os.Mkdir(bad, 0o755)
	like, _ := data.ReadVolume(filepath.Join(first, "b.nii.gz"), 0)
	f, _ := os.Create(filepath.Join(bad, "b.nii.gz"))
	labels := make([]uint16, like.Len())
	labels[len(labels)-1] = 9
	data.WriteMaskVolume(f, like, labels, true)
	f.Close()
	_, err = p.Run(filepath.Join(vols, "b.nii.gz"), filepath.Join(dir, "o1"), Options{Blend: tiles.Gaussian, References: bad}, Limits{}, nil)
	if err == nil || !strings.Contains(err.Error(), "value 9 at voxel (16, 20, 18) is not a class's") {
		t.Errorf("a value not a class's: %v", err)
	}
	_, err = p.Run(filepath.Join(vols, "a_0000.nii.gz"), filepath.Join(dir, "o2"), Options{Blend: tiles.Gaussian, References: filepath.Join(bad, "b.nii.gz")}, Limits{}, nil)
	if err == nil || !strings.Contains(err.Error(), "a reference mask has its volume's voxels") {
		t.Errorf("a reference of other dims: %v", err)
	}
	_, err = p.Run(vols, filepath.Join(dir, "o3"), Options{Blend: tiles.Gaussian, References: bad}, Limits{}, nil)
	if err == nil || !strings.Contains(err.Error(), "holds no mask for") {
		t.Errorf("a missing reference: %v", err)
	}
	// b's reference missing: refused before a, ahead of it, is predicted.
	onlyA := filepath.Join(dir, "only-a")
	os.Mkdir(onlyA, 0o755)
	ra, _ := os.ReadFile(filepath.Join(refs, "a.nii.gz"))
	os.WriteFile(filepath.Join(onlyA, "a.nii.gz"), ra, 0o644)
	var note bytes.Buffer
	_, err = p.Run(vols, filepath.Join(dir, "o4"), Options{Blend: tiles.Gaussian, References: onlyA}, Limits{}, &note)
	if err == nil || !strings.Contains(err.Error(), "holds no mask for "+filepath.Join(vols, "b.nii.gz")) || strings.Contains(note.String(), "a_0000") {
		t.Errorf("b's reference missing: %v; notes %q", err, note.String())
	}
}

// volume3DChildEnv carries a case of TestPredictVolume3DMemory to its
// child: "input|out|window|overlap|channels" (channels > 1: the input is
// a case of as many modalities).
const volume3DChildEnv = "MEMUNET_PREDICT3D_CHILD"

// volume3DLargeEnv, set, adds the 256^3 case (and its 256x256x512 twin)
// to TestPredictVolume3DMemory: about half a minute on 2 cores.
const volume3DLargeEnv = "MEMUNET_PREDICT3D_256"

// TestPredictVolume3DMemory: a 3D UNet's streamed predict of a volume
// peaks within 10% of its own plan of the process's resident memory (the
// process as it stood, the pool's peak, the slab and buffers volumeHost
// counts), each in a fresh process; and twice the depth at the same
// height and width plans the same and peaks within 10% of it: the memory
// is the slab's, not the volume's. A case of two modalities (two streams
// and slabs in step) peaks within 10% of its plan too. With
// MEMUNET_PREDICT3D_256=1, also 256^3 and 256x256x512 by windows of 64^3.
func TestPredictVolume3DMemory(t *testing.T) {
	if v := os.Getenv(volume3DChildEnv); v != "" {
		volume3DChild(t, v)
		return
	}
	type size struct{ x, y, z, window int }
	pairs := [][2]size{{{128, 128, 96, 32}, {128, 128, 192, 32}}}
	if os.Getenv(volume3DLargeEnv) != "" {
		pairs = append(pairs, [2]size{{256, 256, 256, 64}, {256, 256, 512, 64}})
	}
	dir := t.TempDir()
	// measure predicts in (of channels modalities) in a child and checks
	// its peak against its plan.
	// A process of ~22 MiB meets a few MiB of noise on a loaded machine
	// (the collector's timing under CPU starvation): a peak past 10% is
	// measured once more in a fresh process, and the second one stands.
	measure := func(in string, sz size, channels int) (planned, peak int64) {
		var rep Report
		var ratio float64
		var took time.Duration
		for try := range 2 {
			out := filepath.Join(t.TempDir(), "out")
			start := time.Now()
			_, peak = childtest.PeakRSS(t, "TestPredictVolume3DMemory", volume3DChildEnv, fmt.Sprintf("%s|%s|%d|0.25|%d", in, out, sz.window, channels), 5*time.Minute)
			took = time.Since(start)
			b, err := os.ReadFile(filepath.Join(out, runfiles.PredictReport))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if ratio = float64(peak) / float64(rep.PlannedRSSBytes); math.Abs(ratio-1) <= 0.10 {
				break
			}
			if try == 0 {
				t.Logf("%dx%dx%d: peak RSS %.3f of the plan; measuring again", sz.x, sz.y, sz.z, ratio)
			}
		}
		whole := int64(sz.x*sz.y*sz.z) * 2
		t.Logf("%dx%dx%d, %d modalities, by %s: planned %.1f MiB, peak RSS %.1f MiB (%.3f of the plan; the volume's int16 voxels alone %.1f MiB), %v",
			sz.x, sz.y, sz.z, channels, rep.Outputs[0].Volume, mib(rep.PlannedRSSBytes), mib(peak), ratio, mib(whole), took.Round(time.Millisecond))
		if rep.PlannedRSSBytes <= 0 || math.Abs(ratio-1) > 0.10 {
			t.Errorf("%dx%dx%d, %d modalities: peak RSS %d is not within 10%% of the planned %d", sz.x, sz.y, sz.z, channels, peak, rep.PlannedRSSBytes)
		}
		return rep.PlannedRSSBytes, peak
	}
	for _, pair := range pairs {
		var planned, peaks [2]int64
		for i, sz := range pair {
			in := filepath.Join(dir, fmt.Sprintf("v%dx%dx%d.nii.gz", sz.x, sz.y, sz.z))
			writeVolume(t, in, sz.x, sz.y, sz.z)
			planned[i], peaks[i] = measure(in, sz, 1)
		}
		if r := float64(planned[1]) / float64(planned[0]); math.Abs(r-1) > 0.02 {
			t.Errorf("twice the depth plans %.3fx", r)
		}
		if r := float64(peaks[1]) / float64(peaks[0]); math.Abs(r-1) > 0.10 {
			t.Errorf("twice the depth peaks at %.3fx", r)
		}
	}
	sz := pairs[0][0]
	mm := filepath.Join(dir, "cases")
	os.Mkdir(mm, 0o755)
	for ch := range 2 {
		writeVolume(t, filepath.Join(mm, fmt.Sprintf("c_%04d.nii.gz", ch)), sz.x, sz.y, sz.z)
	}
	measure(filepath.Join(mm, "c_0000.nii.gz"), sz, 2)
}

// volume3DChild predicts one case of TestPredictVolume3DMemory (v is
// "input|out|window|overlap|channels") and reports its own peak.
func volume3DChild(t *testing.T, v string) {
	defer childtest.ReportPeak(t)
	f := strings.Split(v, "|")
	window, _ := strconv.Atoi(f[2])
	overlap, _ := strconv.ParseFloat(f[3], 64)
	channels, _ := strconv.Atoi(f[4])
	p := tiny3D(t, 2, window, 1)
	if channels > 1 { // a model trained on cases of as many modalities
		p.Close()
		cfg := p.Config
		cfg.Model.InChannels, cfg.Data.Source = channels, data.SourceNIfTI
		var err error
		if p, err = newPredictor(cfg, cpu.New(), backend.Float32, 0, 1); err != nil {
			t.Fatal(err)
		}
		defer p.Close()
	}
	if _, err := p.Run(f[0], f[1], Options{Blend: tiles.Gaussian, Overlap: overlap}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestPredictVolume3DScoresByLabels: with data.labels the references are
// read as training read its masks, values merged into one class and
// ignored ones not counted, and data.background is what the mean without
// background leaves out.
func TestPredictVolume3DScoresByLabels(t *testing.T) {
	dir := t.TempDir()
	vol := filepath.Join(dir, "v.nii.gz")
	writeVolume(t, vol, 17, 21, 19)
	p := tiny3D(t, 3, 16, 3)
	first := filepath.Join(dir, "first")
	if _, err := p.Run(vol, first, Options{Blend: tiles.Gaussian, Overlap: 0.25, ClassIndices: true}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	pred, err := data.ReadVolume(filepath.Join(first, "v.nii.gz"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Class 0 is value 7, class 1 values 8 and 9 (merged), class 2 value 5,
	// value 0 ignored; every fifth voxel predicted 0 is 2 in the reference.
	p.Config.Data.Labels = data.Labels{0: data.LabelIgnore, 7: 0, 8: 1, 9: 1, 5: 2}
	p.Config.Data.Background = 1
	raw := [3][]uint16{{7}, {8, 9}, {5}}
	labels := make([]uint16, pred.Len())
	for k := range labels {
		c := int(pred.At(k))
		if c == 0 && k%5 == 0 {
			c = 2
		}
		labels[k] = raw[c][k%len(raw[c])]
		if k%11 == 0 {
			labels[k] = 0
		}
	}
	refs := filepath.Join(dir, "refs")
	os.Mkdir(refs, 0o755)
	f, err := os.Create(filepath.Join(refs, "v.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteMaskVolume(f, pred, labels, true); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep, err := p.Run(vol, filepath.Join(dir, "scored"), Options{Blend: tiles.Gaussian, Overlap: 0.25, References: refs}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Outputs[0].Score
	if s == nil || s.Dice[0] == nil || s.Dice[2] == nil || s.MeanDiceForeground == nil {
		t.Fatalf("score %+v", s)
	}
	if want := (*s.Dice[0] + *s.Dice[2]) / 2; math.Abs(*s.MeanDiceForeground-want) > 1e-12 || *s.Dice[0] == 1 {
		t.Errorf("dice %v: mean without background (class 1) %v, want %v", s.Dice, *s.MeanDiceForeground, want)
	}
	if s.Dice[1] != nil && *s.Dice[1] != 1 {
		t.Errorf("class 1 (values 8 and 9 merged): dice %v, want 1", *s.Dice[1])
	}
}

// TestPredictorCapacityBelowWeights: a pool too small for the model's
// weights is refused naming --capacity, 2D and 3D, fp32 and fp16, not
// reported as an allocator's out-of-memory.
func TestPredictorCapacityBelowWeights(t *testing.T) {
	for _, tc := range []struct {
		dims int
		prec backend.DType
	}{{3, backend.Float32}, {2, backend.Float32}, {3, backend.Float16}} {
		cfg := config.Default()
		cfg.Model.Base, cfg.Model.Depth, cfg.Model.InChannels, cfg.Model.Dims = 2, 1, 1, tc.dims
		_, err := newPredictor(cfg, cpu.New(), tc.prec, 1<<10, 1)
		if err == nil || !strings.Contains(err.Error(), "a pool of 1.00 KiB (--capacity, else the checkpoint's memory.capacity) cannot hold the model's weights; raise --capacity") {
			t.Errorf("dims %d, %v: %v", tc.dims, tc.prec, err)
		}
	}
}
