package data

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeSyntheticVolumes writes count synthetic 16^3 volumes as a nifti
// folder and returns the folder and the set they were drawn from.
func writeSyntheticVolumes(t *testing.T, count int) (string, *Synthetic) {
	t.Helper()
	syn, err := NewSyntheticExact(SyntheticConfig{Count: count, Size: 16, Depth: 16, Classes: 4, Seed: 5, Noise: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteVolumeFolder(syn, dir); err != nil {
		t.Fatal(err)
	}
	return dir, syn
}

func volumeConfig(dir string) SourceConfig {
	return SourceConfig{Config: Config{Source: SourceNIfTI, Path: dir, ValFraction: 0.25, Seed: 1, NIfTI: NIfTIConfig{Axis: 2}, PatchForeground: DefaultPatchForeground},
		Channels: 1, Classes: 4, Dims: 3, SizeMultiple: 4, DepthMultiple: 4}
}

// TestNIfTIVolumesWhole: with model.dims 3 and no data.patch, sample i is
// volume i whole, its slices stacked, D along z: the masks are the
// written ones voxel for voxel, the split is by volume.
func TestNIfTIVolumesWhole(t *testing.T) {
	dir, syn := writeSyntheticVolumes(t, 6)
	cfg := volumeConfig(dir)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ds := set.Data
	if d, h, w := SampleShape(ds); ds.Len() != 6 || d != 16 || h != 16 || w != 16 {
		t.Fatalf("%d samples of %dx%dx%d; want 6 of 16^3", ds.Len(), d, h, w)
	}
	if got := set.Report.Spacing; got != "1x1x1 mm (x, y, z)" {
		t.Errorf("voxel spacing %q, want the written 1x1x1 mm", got)
	}
	if len(set.Train)+len(set.Val) != 6 || len(set.Val) == 0 {
		t.Fatalf("split %v / %v", set.Train, set.Val)
	}
	if d, h, w, err := ProbeShape(cfg); err != nil || d != 16 || h != 16 || w != 16 {
		t.Fatalf("ProbeShape = %d, %d, %d, %v", d, h, w, err)
	}
	n := 16 * 16 * 16
	img, mask := make([]float32, n), make([]uint8, n)
	want, wantImg := make([]uint8, n), make([]float32, 3*n)
	for i := range ds.Len() {
		if err := ds.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		syn.generate(i, wantImg, want, nil)
		if !slices.Equal(mask, want) {
			t.Fatalf("volume %d: the mask differs from the written one", i)
		}
		// Foreground is brighter or darker than the background by >= 0.35
		// in raw intensity: a class's voxels differ from class 0's.
		var bg, fg float32
		var nb, nf int
		for v, m := range mask {
			if m == 0 {
				bg += img[v]
				nb++
			} else {
				fg += img[v]
				nf++
			}
		}
		if nf == 0 || nb == 0 || bg/float32(nb) == fg/float32(nf) {
			t.Fatalf("volume %d: %d foreground, %d background voxels of equal mean", i, nf, nb)
		}
	}
}

// TestNIfTIVolumePatches: data.patch [D, H, W] cuts patches; the centre
// one for Sample, drawn ones for training, every one centred on a
// foreground voxel with data.patch_foreground 1; a patch deeper than the
// volume is padded with Ignore.
func TestNIfTIVolumePatches(t *testing.T) {
	dir, _ := writeSyntheticVolumes(t, 4)
	cfg := volumeConfig(dir)
	cfg.Patch, cfg.PatchForeground = []int{8, 8, 8}, 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	es, ok := set.Data.(epochSampler)
	if !ok {
		t.Fatalf("%T draws no patches", set.Data)
	}
	img, mask := make([]float32, 512), make([]uint8, 512)
	for i := range set.Data.Len() {
		for epoch := range 8 {
			if err := es.sampleEpoch(i, 1, epoch, img, mask); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(mask, func(c uint8) bool { return c != 0 && c != Ignore }) {
				t.Fatalf("volume %d, epoch %d: a foreground patch holds no foreground", i, epoch)
			}
		}
	}
	cfg.Patch = []int{32, 8, 8}
	set, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	img, mask = make([]float32, 32*64), make([]uint8, 32*64)
	if err := set.Data.Sample(0, img, mask); err != nil {
		t.Fatal(err)
	}
	for z := range 32 {
		padded := z < 8 || z >= 24 // 16 slices centred in 32
		for _, c := range mask[z*64 : (z+1)*64] {
			if (c == Ignore) != padded {
				t.Fatalf("slice %d of a 32-deep patch of a 16-deep volume: mask %d", z, c)
			}
		}
	}
}

// TestNIfTIVolumesRefused: what volumes cannot take from data.nifti and
// data.patch is an error naming the key.
func TestNIfTIVolumesRefused(t *testing.T) {
	for _, tc := range []struct {
		key  string
		edit func(c *SourceConfig)
	}{
		{"data.patch", func(c *SourceConfig) { c.Patch = []int{8, 8} }},
		{"data.patch", func(c *SourceConfig) { c.Patch = []int{6, 8, 8} }},
		{"data.nifti.axis", func(c *SourceConfig) { c.NIfTI.Axis = 0 }},
		{"data.nifti.skip_empty", func(c *SourceConfig) { c.NIfTI.SkipEmpty = true }},
	} {
		c := volumeConfig("x")
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("%s: got %v, want an error naming it", tc.key, err)
		}
	}
}

// TestZScoreVolumes: data.nifti.normalize zscore gives each volume's
// training input zero mean and unit variance (whole volumes, so every
// voxel is in the sample), in 2D slices and 3D volumes alike, and
// MeanStd is the same normalization as data.mean and data.std.
func TestZScoreVolumes(t *testing.T) {
	dir, _ := writeSyntheticVolumes(t, 4)
	for _, dims := range []int{2, 3} {
		cfg := volumeConfig(dir)
		cfg.Dims, cfg.NIfTI.Normalize = dims, NormalizeZScore
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		set, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h, w := set.Data.Size()
		img, mask := make([]float32, h*w), make([]uint8, h*w)
		var sum, sumSq float64
		n := 0
		for i := range set.Data.Len() {
			if err := set.Data.Sample(i, img, mask); err != nil {
				t.Fatal(err)
			}
			for _, v := range img {
				sum, sumSq = sum+float64(v), sumSq+float64(v)*float64(v)
			}
			n += len(img)
			if dims == 3 { // one volume a sample
				mean, std := sum/float64(n), math.Sqrt(sumSq/float64(n)-sum*sum/float64(n*n))
				if math.Abs(mean) > 1e-3 || math.Abs(std-1) > 1e-3 {
					t.Errorf("3D volume %d: mean %.5f, std %.5f", i, mean, std)
				}
				sum, sumSq, n = 0, 0, 0
			}
		}
		if dims == 2 { // the slices of 4 volumes, each zero-mean
			if mean := sum / float64(n); math.Abs(mean) > 1e-3 {
				t.Errorf("2D slices: mean %.5f", mean)
			}
		}
	}
	in := Intensity{Lo: -100, Hi: 900, ZScore: true, VolMean: 150, VolStd: 80}
	a, b := in.Affine()
	m, s := in.MeanStd()
	for _, v := range []float64{0, 0.3, 1} {
		z := (float64(in.Lo) + v*(in.Hi-in.Lo) - in.VolMean) / in.VolStd
		viaAffine := float64(a)*(v-Mean)/Std + float64(b)
		viaMeanStd := (v - m) / s
		if math.Abs(viaAffine-z) > 1e-5 || math.Abs(viaMeanStd-z) > 1e-5 {
			t.Errorf("v %g: z %g, by Affine %g, by MeanStd %g", v, z, viaAffine, viaMeanStd)
		}
	}
}

// TestNIfTIModalities: nnU-Net's naming, DIR/images/CASE_0000.nii.gz,
// CASE_0001.nii.gz, ... with DIR/masks/CASE.nii.gz, makes one sample of
// as many channels, each windowed on its own, in 2D slices and 3D
// volumes; a case short of a modality and a model.in_channels that is
// not their number are problems naming the file and the fix.
func TestNIfTIModalities(t *testing.T) {
	one, _ := writeSyntheticVolumes(t, 4)
	dir := t.TempDir()
	for _, sub := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Channel 0 is the written volume, channel 1 the same volume again:
	// its values windowed on their own come out equal to channel 0's.
	for i := range 4 {
		name := fmt.Sprintf("vol_%04d", i)
		b, err := os.ReadFile(filepath.Join(one, "images", name+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := os.ReadFile(filepath.Join(one, "masks", name+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "images", name+"_0000.nii.gz"), b)
		writeFile(t, filepath.Join(dir, "images", name+"_0001.nii.gz"), b)
		writeFile(t, filepath.Join(dir, "masks", name+".nii.gz"), m)
	}
	for _, dims := range []int{2, 3} {
		cfg := volumeConfig(dir)
		cfg.Dims, cfg.Channels = dims, 2
		set, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if set.Data.Len() == 0 || set.Data.Channels() != 2 || SampleName(set.Data, 0) == "" {
			t.Fatalf("dims %d: %d samples of %d channels", dims, set.Data.Len(), set.Data.Channels())
		}
		h, w := set.Data.Size()
		img, mask := make([]float32, 2*h*w), make([]uint8, h*w)
		if err := set.Data.Sample(set.Data.Len()-1, img, mask); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(img[:h*w], img[h*w:]) || slices.Max(img) == slices.Min(img) {
			t.Errorf("dims %d: the two channels of one volume differ", dims)
		}
		cfg.Channels = 1
		if rep, err := Check(cfg); err != nil || !strings.Contains(fmt.Sprint(rep.Problems), "has 2 modalities a case (vol_0000_0000 .. vol_0000_0001) but model.in_channels is 1; set model.in_channels: 2") {
			t.Errorf("dims %d, one channel: %v %v", dims, err, rep.Problems)
		}
	}
	cfg2 := volumeConfig(dir)
	cfg2.Dims, cfg2.Channels, cfg2.Patch = 2, 2, []int{8, 8}
	if rep, err := Check(cfg2); err != nil || !strings.Contains(fmt.Sprint(rep.Problems), "has 2 modalities a case, and data.patch, data.resize and data.scale take one channel") {
		t.Errorf("2D patches of 2 modalities: %v %v", err, rep.Problems)
	}
	os.Remove(filepath.Join(dir, "images", "vol_0002_0000.nii.gz"))
	cfg := volumeConfig(dir)
	cfg.Channels = 2
	if rep, err := Check(cfg); err != nil || !strings.Contains(fmt.Sprint(rep.Problems), "case vol_0002 has modalities vol_0002_0001 but no vol_0002_0000") {
		t.Errorf("a missing modality: %v %v", err, rep.Problems)
	}
}

// TestNIfTIFolders: a nifti set laid out in train/ val/ test/ folders
// splits by them, as data.source folder does, for slices and volumes; the
// test folder's volumes never train or validate.
func TestNIfTIFolders(t *testing.T) {
	root := t.TempDir()
	for part, n := range map[string]int{"train": 3, "val": 1, "test": 2} {
		src, _ := writeSyntheticVolumes(t, n)
		if err := os.Rename(src, filepath.Join(root, part)); err != nil {
			t.Fatal(err)
		}
	}
	for _, dims := range []int{2, 3} {
		cfg := volumeConfig(root)
		cfg.Dims = dims
		set, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		per := 1 // samples a volume
		if dims == 2 {
			per = 16
		}
		if len(set.Train) != 3*per || len(set.Val) != per || len(set.Test) != 2*per || !set.Report.SplitFolders {
			t.Errorf("dims %d: train %d, val %d, test %d samples; want 3, 1, 2 volumes of %d", dims, len(set.Train), len(set.Val), len(set.Test), per)
		}
		for _, i := range set.Test {
			if slices.Contains(set.Train, i) || slices.Contains(set.Val, i) {
				t.Fatalf("dims %d: test sample %d also trains or validates", dims, i)
			}
		}
	}
}

// TestNIfTIVolumesOfSizes: volumes of different sizes without data.patch
// are refused naming the odd file and the key that fixes it: data.patch
// for a 3D UNet (which refuses data.resize), data.resize for slices.
func TestNIfTIVolumesOfSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		dims int
		odd  []int
		want string
	}{
		{"depth differs", 3, []int{8, 8, 4}, "is 8x8x4 voxels but"},
		{"slices differ", 3, []int{4, 4, 8}, "has 4x4 (height x width) slices but"},
		{"slices differ, 2D", 2, []int{4, 4, 8}, "set data.resize: [H, W]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeNIfTISet(t, dir, 3, []int{8, 8, 8})
			nv := tc.odd[0] * tc.odd[1] * tc.odd[2]
			writeFile(t, filepath.Join(dir, "images", "odd.nii.gz"), niftiFile(tc.odd, niftiInt16, make([]float64, nv), true))
			writeFile(t, filepath.Join(dir, "masks", "odd.nii.gz"), niftiFile(tc.odd, niftiUint8, make([]float64, nv), true))
			cfg := volumeConfig(dir)
			cfg.Dims, cfg.Classes = tc.dims, 3
			_, err := Open(cfg)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "images", "odd.nii.gz")) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming odd.nii.gz and %q", err, tc.want)
			}
			if tc.dims == 3 && (!strings.Contains(err.Error(), "set data.patch: [D, H, W]") || strings.Contains(err.Error(), "data.resize")) {
				t.Errorf("error %v: want data.patch as the fix, not data.resize", err)
			}
		})
	}
}

// TestIntensityRefused: voxels that cannot be normalized (NaN, infinite,
// or values whose range or squares overflow float64) are refused naming
// the file, for training (Open) and predict (StreamIntensity,
// Volume.Intensity), instead of becoming NaN inputs.
func TestIntensityRefused(t *testing.T) {
	const n = 8 * 8 * 8
	fill := func(f func(k int) float64) []float64 {
		vals := make([]float64, n)
		for k := range vals {
			vals[k] = f(k)
		}
		return vals
	}
	zscore := NIfTIConfig{Axis: 2, Normalize: NormalizeZScore}
	for _, tc := range []struct {
		name string
		vals []float64
		nc   NIfTIConfig
		want string
	}{
		{"huge, zscore", fill(func(int) float64 { return 1e300 }), zscore, "too large to normalize"},
		{"huge range", fill(func(k int) float64 { return float64(k%2*2-1) * 1e308 }), NIfTIConfig{Axis: 2}, "too large to normalize"},
		{"huge, zscore in a wide window", fill(func(int) float64 { return 1e300 }), NIfTIConfig{Axis: 2, Normalize: NormalizeZScore, Window: []float64{-1e301, 1e301}}, "too large to normalize"},
		{"NaN", fill(func(k int) float64 { return [2]float64{math.NaN(), 1}[min(k, 1)] }), NIfTIConfig{Axis: 2}, "NaN"},
		{"Inf, zscore", fill(func(k int) float64 { return [2]float64{math.Inf(-1), 1}[min(k, 1)] }), zscore, "Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeNIfTISet(t, dir, 3, []int{8, 8, 8})
			img := filepath.Join(dir, "images", "case1.nii.gz")
			writeFile(t, img, niftiFile([]int{8, 8, 8}, niftiFloat64, tc.vals, true))
			cfg := volumeConfig(dir)
			cfg.Classes, cfg.NIfTI = 3, tc.nc
			if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), img+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v, want an error naming %s and %q", err, img, tc.want)
			}
			want := tc.want
			if want == "Inf" {
				want = "infinite voxels" // the scan says the voxel, the others the kind
			}
			if _, err := StreamIntensity(img, tc.nc); err == nil || !strings.HasPrefix(err.Error(), img+": ") || !strings.Contains(err.Error(), want) {
				t.Errorf("StreamIntensity: %v, want an error naming %s and %q", err, img, want)
			}
			v, err := ReadVolume(img, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Intensity(tc.nc); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Volume.Intensity: %v, want %q", err, want)
			}
		})
	}
}
