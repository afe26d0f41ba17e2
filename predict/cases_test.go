package predict

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/tiles"
)

// writeVolumeOf writes an x x y x z int16 NIfTI-1 volume of voxels
// at(x, y, z), gzipped where path ends in .gz, with pixdim spacing.
func writeVolumeOf(t *testing.T, path string, x, y, z int, spacing float32, at func(x, y, z int) int16) {
	t.Helper()
	le := binary.LittleEndian
	h := make([]byte, 352)
	le.PutUint32(h, 348)
	for i, d := range []int16{3, int16(x), int16(y), int16(z), 1, 1, 1, 1} {
		le.PutUint16(h[40+2*i:], uint16(d))
	}
	le.PutUint16(h[70:], 4)  // datatype int16
	le.PutUint16(h[72:], 16) // bitpix
	le.PutUint32(h[76:], math.Float32bits(1))
	for i := 1; i < 8; i++ {
		le.PutUint32(h[76+4*i:], math.Float32bits(spacing)) // pixdim
	}
	le.PutUint32(h[108:], math.Float32bits(352)) // vox_offset
	copy(h[344:], "n+1\x00")
	vox := make([]byte, 2*x*y*z)
	for k := range x * y * z {
		le.PutUint16(vox[2*k:], uint16(at(k%x, k/x%y, k/(x*y))))
	}
	b := append(h, vox...)
	if strings.HasSuffix(path, ".gz") {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(b)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		b = zb.Bytes()
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// modality is a test case's channel ch: noise and blocks in channel 0,
// a ball on other noise in another range in channel 1 (so that each
// modality's own window and statistics matter).
func modality(ch, seed int) func(x, y, z int) int16 {
	return func(x, y, z int) int16 {
		r := uint32(x*73856093^y*19349663^z*83492791) * uint32(2*seed+ch+1) * 2654435761
		n := int16(r >> 25) // 0..127
		if ch == 0 {
			if (x/6+y/5+z/7)%3 == 0 {
				return n + 1000
			}
			return n
		}
		dx, dy, dz := float64(x-9), float64(y-8), float64(z-7)
		if dx*dx+dy*dy+dz*dz < 40 {
			return -3*n + 2500
		}
		return -4*n - 900
	}
}

// writeCase writes case name's modalities into dir, extension ext each
// (.nii or .nii.gz, one a modality), x x y x z voxels, and returns their
// paths.
func writeCase(t *testing.T, dir, name string, x, y, z, seed int, exts ...string) []string {
	t.Helper()
	var paths []string
	for ch, ext := range exts {
		path := filepath.Join(dir, name+"_000"+string(rune('0'+ch))+ext)
		writeVolumeOf(t, path, x, y, z, float32(1+ch), modality(ch%2, seed))
		paths = append(paths, path)
	}
	return paths
}

// tinyCases3D is tiny3D over cases of c modalities (data.source nifti).
func tinyCases3D(t *testing.T, c int) *Predictor {
	t.Helper()
	p := tiny3D(t, 3, 16, 3)
	p.Close()
	cfg := p.Config
	cfg.Model.InChannels = c
	cfg.Data.Source = data.SourceNIfTI
	p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestPredictVolume3DModalities: a 3D UNet trained on cases of two
// modalities predicts CASE_0000.nii.gz and CASE_0001.nii (different
// contents, ranges and spacing) streamed in step into CASE.nii.gz, with
// channel 0's header geometry: the classes of the whole-volume reference
// fed channel by channel, each modality windowed (by its min and max, or
// data.nifti.window) or z-scored by its own intensities; either
// modality's file names the case; the modalities swapped predict
// otherwise.
func TestPredictVolume3DModalities(t *testing.T) {
	for _, tc := range []struct {
		window    []float64
		zscore    bool
		mean, std []float64
	}{
		{nil, false, nil, nil},
		{nil, false, []float64{0.4, 0.55}, []float64{0.2, 0.3}},
		{[]float64{-500, 1500}, false, nil, nil},
		{nil, true, nil, nil},
	} {
		p := tinyCases3D(t, 2)
		p.Config.Data.NIfTI.Window, p.Config.Data.Mean, p.Config.Data.Std = tc.window, tc.mean, tc.std
		p.Config.Data.NIfTI.Normalize = data.NormalizeWindow
		if tc.zscore {
			p.Config.Data.NIfTI.Normalize = data.NormalizeZScore
		}
		dir := t.TempDir()
		paths := writeCase(t, dir, "case", 21, 19, 18, 1, ".nii.gz", ".nii")
		var masks [][]float64
		for _, input := range paths {
			out := t.TempDir()
			rep, err := p.Run(input, out, Options{Blend: tiles.Gaussian, Overlap: 0.5}, Limits{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Outputs) != 1 || rep.Outputs[0].Mask != "case.nii.gz" || rep.Outputs[0].Input != paths[0] || !slices.Equal(rep.Outputs[0].Channels, paths) || rep.Counted() != "1 volume" {
				t.Fatalf("%s: outputs %+v (%s)", input, rep.Outputs, rep.Counted())
			}
			got, err := data.ReadVolume(filepath.Join(out, "case.nii.gz"), 0)
			if err != nil {
				t.Fatal(err)
			}
			ch0, _ := data.ReadVolume(paths[0], 0)
			if !bytes.Equal(got.Geometry(), ch0.Geometry()) || !got.Gzip {
				t.Errorf("the mask's geometry is not channel 0's")
			}
			m := make([]float64, got.Len())
			for k := range m {
				m[k] = got.At(k)
			}
			masks = append(masks, m)
		}
		if !slices.Equal(masks[0], masks[1]) {
			t.Errorf("%+v: the case named by its _0001 predicts otherwise", tc)
		}
		want, margin := wholeVolume3D(t, p, paths, 16, 0.5, tiles.Gaussian)
		seen, close := map[uint8]int{}, 0
		for at, c := range want {
			seen[c]++
			if float64(c) == masks[0][at] {
				continue
			}
			if margin[at] > 1e-4 {
				t.Fatalf("%+v: voxel %d is class %g, the whole-volume reference %d (margin %.3g)", tc, at, masks[0][at], c, margin[at])
			}
			close++
		}
		if len(seen) < 2 || close > len(want)/1000 {
			t.Errorf("%+v: classes %v, %d near ties differ", tc, seen, close)
		}
		swapped, _ := wholeVolume3D(t, p, []string{paths[1], paths[0]}, 16, 0.5, tiles.Gaussian)
		differ := 0
		for at, c := range swapped {
			if float64(c) != masks[0][at] {
				differ++
			}
		}
		if differ < len(want)/100 {
			t.Errorf("%+v: the modalities swapped change %d voxels of %d: the channels are not the model's own", tc, differ, len(want))
		}
		t.Logf("%+v: classes %v, %d near ties differ; swapped, %d voxels differ", tc, seen, close, differ)
	}
}

// TestPredictModalitiesFolder: a folder of two cases of two modalities
// (and a reference folder of CASE.nii.gz masks) predicts each case once,
// into CASE.nii.gz, scored against its reference; a 2D model of two
// channels predicts a case slice by slice, each slice the model's
// prediction of its two modalities' pictures.
func TestPredictModalitiesFolder(t *testing.T) {
	dir := t.TempDir()
	in, refs := filepath.Join(dir, "imagesTs"), filepath.Join(dir, "labelsTs")
	os.Mkdir(in, 0o755)
	os.Mkdir(refs, 0o755)
	a := writeCase(t, in, "la_001", 20, 18, 17, 1, ".nii.gz", ".nii.gz")
	b := writeCase(t, in, "la_002", 17, 21, 19, 2, ".nii.gz", ".nii.gz")
	p := tinyCases3D(t, 2)
	first := filepath.Join(dir, "first")
	var note bytes.Buffer
	rep, err := p.Run(in, first, Options{Blend: tiles.Gaussian, Overlap: 0.25}, Limits{}, &note)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note.String(), "la_002_0000.nii.gz, la_002_0001.nii.gz (17x21x19)") {
		t.Errorf("note: %s", note.String())
	}
	if len(rep.Outputs) != 2 || rep.Images != 2 || rep.Outputs[0].Mask != "la_001.nii.gz" || rep.Outputs[1].Mask != "la_002.nii.gz" ||
		!slices.Equal(rep.Outputs[0].Channels, a) || !slices.Equal(rep.Outputs[1].Channels, b) || rep.Counted() != "2 volumes" {
		t.Fatalf("outputs %+v, %d images", rep.Outputs, rep.Images)
	}
	ents, _ := os.ReadDir(first)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if slices.Contains(names, "la_001_0000.nii.gz") || slices.Contains(names, "la_001_0001.nii.gz") {
		t.Errorf("a modality predicted alone: %v", names)
	}
	for _, name := range []string{"la_001.nii.gz", "la_002.nii.gz"} {
		raw, err := os.ReadFile(filepath.Join(first, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(refs, name), raw, 0o644)
	}
	rep, err = p.Run(in, filepath.Join(dir, "scored"), Options{Blend: tiles.Gaussian, Overlap: 0.25, References: refs}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rep.Outputs {
		if o.Score == nil || *o.Score.MeanDice != 1 || filepath.Dir(o.Score.Reference) != refs {
			t.Errorf("%s: score %+v against its own prediction", o.Input, o.Score)
		}
	}

	// 2D: whole slices of 20x18 (x, y), two channels.
	p2 := tinyPredictor(t, 1)
	p2.Close()
	cfg := p2.Config
	cfg.Model.InChannels, cfg.Data.Source = 2, data.SourceNIfTI
	if p2, err = newPredictor(cfg, cpu.New(), backend.Float32, 0, 1); err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	c2 := writeCase(t, dir, "two", 20, 16, 5, 3, ".nii.gz", ".nii")
	for _, zscore := range []bool{false, true} {
		p2.Config.Data.NIfTI.Normalize = data.NormalizeWindow
		if zscore {
			p2.Config.Data.NIfTI.Normalize = data.NormalizeZScore
		}
		out := t.TempDir()
		rep, err := p2.Run(c2[1], out, Options{Tile: TileNone}, Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Outputs) != 1 || rep.Outputs[0].Mask != "two.nii.gz" || !slices.Equal(rep.Outputs[0].Channels, c2) {
			t.Fatalf("2D outputs %+v", rep.Outputs)
		}
		got, err := data.ReadVolume(filepath.Join(out, "two.nii.gz"), 0)
		if err != nil {
			t.Fatal(err)
		}
		var vols []*data.Volume
		var norms []data.Intensity
		for _, path := range c2 {
			v, _ := data.ReadVolume(path, 0)
			norm, _ := v.Intensity(p2.Config.Data.NIfTI)
			vols, norms = append(vols, v), append(norms, norm)
		}
		const h, w = 16, 20
		img := make([]float32, 2*h*w)
		seen := map[uint8]bool{}
		for k := range 5 {
			for ch, v := range vols {
				a, b := norms[ch].Affine()
				data.Window(v.SlicePicture(2, k, norms[ch].Lo, norms[ch].Hi), 1, 0, 0, h, w, []float32{a}, []float32{b}, false, img[ch*h*w:])
			}
			pred, err := p2.Predict(img, 1, h, w)
			if err != nil {
				t.Fatal(err)
			}
			for y := range h {
				for x := range w {
					seen[pred[y*w+x]] = true
					if g := got.At(got.VoxelIndex(2, k, y, x)); g != float64(pred[y*w+x]) {
						t.Fatalf("2D, zscore %v: slice %d (%d, %d) is %g, its modalities' prediction %d", zscore, k, x, y, g, pred[y*w+x])
					}
				}
			}
		}
		if len(seen) < 2 {
			t.Errorf("2D, zscore %v: classes %v", zscore, seen)
		}
		// By tiles too (the picture's channels are the modalities there
		// as well).
		rep, err = p2.Run(c2[0], t.TempDir(), Options{Tile: "8", Blend: tiles.Gaussian, Overlap: 0.25}, Limits{}, nil)
		if err != nil || len(rep.Outputs) != 1 || rep.Outputs[0].Tiling == nil || rep.Outputs[0].Mask != "two.nii.gz" {
			t.Fatalf("2D by tiles: %v, %+v", err, rep)
		}
	}
}

// TestPredictModalitiesRefused: a case that is not the model's is
// refused before anything is written, naming the file and the fix: a
// missing modality, one past the model's count, a file not named as a
// modality, two files of one modality, modalities of other dims; and a
// 2D model of more modalities than a slice picture holds.
func TestPredictModalitiesRefused(t *testing.T) {
	p := tinyCases3D(t, 2)
	for _, tc := range []struct {
		name  string
		files []string // written, 14^3 unless named "odd"
		input string   // in the folder; "" for the folder
		want  string
	}{
		{"missing", []string{"a_0000.nii.gz"}, "a_0000.nii.gz", "its case a has no IN/a_0001.nii.gz: the model takes 2 modalities a case (model.in_channels), a_0000 .. a_0001"},
		{"missing in a folder", []string{"a_0000.nii.gz", "a_0001.nii.gz", "b_0001.nii"}, "", "IN/b_0001.nii: its case b has no IN/b_0000.nii.gz"},
		{"too many", []string{"a_0000.nii.gz", "a_0001.nii.gz", "a_0002.nii"}, "a_0001.nii.gz", "IN/a_0002.nii: case a has 3 modalities and a_0000 .. a_0001 are the model's 2 (model.in_channels); move a_0002.nii out of the folder"},
		{"not a modality", []string{"a_0000.nii.gz", "a_0001.nii.gz", "b.nii.gz"}, "", "IN/b.nii.gz: the model takes 2 modalities a case (model.in_channels), read from files named CASE_0000.nii.gz .. CASE_0001.nii.gz"},
		{"twice", []string{"a_0000.nii.gz", "a_0001.nii.gz", "a_0001.nii"}, "a_0000.nii.gz", "are both modality 1 of case a; keep one"},
		{"dims", []string{"a_0000.nii.gz", "odd_a_0001.nii.gz"}, "", "IN/a_0001.nii.gz is 14x14x15 voxels but IN/a_0000.nii.gz is 14x14x14; a case's modalities must have one size"},
	} {
		in := t.TempDir()
		for _, f := range tc.files {
			z := 14
			if name, ok := strings.CutPrefix(f, "odd_"); ok {
				f, z = name, 15
			}
			writeVolumeOf(t, filepath.Join(in, f), 14, 14, z, 1, modality(0, 1))
		}
		input := filepath.Join(in, tc.input)
		out := filepath.Join(t.TempDir(), "out")
		want := strings.ReplaceAll(tc.want, "IN/", in+string(filepath.Separator))
		if _, err := p.Run(input, out, Options{Blend: tiles.Gaussian}, Limits{}, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", tc.name, err, want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: the output folder was made (%v)", tc.name, err)
		}
	}
	p5 := tinyPredictor(t, 1)
	p5.Close()
	cfg := p5.Config
	cfg.Model.InChannels, cfg.Data.Source = 5, data.SourceNIfTI
	p5, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p5.Close()
	in := t.TempDir()
	five := writeCase(t, in, "f", 8, 8, 3, 1, ".nii", ".nii", ".nii", ".nii", ".nii")
	if _, err := p5.Run(five[0], t.TempDir(), Options{}, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "a 2D model predicts cases of up to 4 modalities, and this one takes 5") {
		t.Errorf("a 2D model of 5 modalities: %v", err)
	}
}

// TestVolumePlanModalities: each modality's stream and slab is planned:
// a case of two modalities plans one more stream, slice and 16-bit slab
// on the host than one volume, and the same pool peak.
func TestVolumePlanModalities(t *testing.T) {
	p := tinyCases3D(t, 2)
	x, y := 96, 80
	one, l, err := p.planVolume([3]int{x, y, 64}, [3]int{16, 16, 16}, 0.5, 1, int64(2*x*y), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	two, _, err := p.planVolume([3]int{x, y, 64}, [3]int{16, 16, 16}, 0.5, 2, int64(4*x*y), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	more := p.volumeHost(l, 2, int64(4*x*y), 0) - p.volumeHost(l, 1, int64(2*x*y), 0)
	if want := int64(data.VolumeStreamBytes + 2*x*y + l.inDepth*x*y*2); more != want || two.Host <= one.Host || two.PeakAllocated != one.PeakAllocated {
		t.Errorf("a second modality plans %d more host bytes, want %d (plans %+v, %+v)", more, want, one, two)
	}
}
