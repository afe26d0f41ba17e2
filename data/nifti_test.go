package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fixtureValue is tools/goldens/make_nifti_fixtures.py's value(kind, x, y, z).
func fixtureValue(kind string, x, y, z int) float64 {
	v := float64((x*7 + y*13 + z*29) % 97)
	switch kind {
	case "int16":
		return v*300 - 14000
	case "uint16":
		return v*600 + 7
	case "int32":
		return v*100000 - 4000000
	case "float32":
		return v/4 - 10.25
	case "label":
		return float64((x/3 + y/4 + z) % 3)
	}
	return v
}

// TestNIfTIFixtures holds the reader to files written by Python's struct
// and gzip modules (tools/goldens/make_nifti_fixtures.py): every voxel type
// memunet reads, both byte orders, gzip or not, scl_slope/scl_inter, an
// extension before the voxels.
func TestNIfTIFixtures(t *testing.T) {
	for _, tc := range []struct {
		file, kind, typ string
		gz, big         bool
		slope, inter    float64
	}{
		{"uint8.nii", "uint8", "uint8", false, false, 0, 0},
		{"int16.nii.gz", "int16", "int16", true, false, 0, 0},
		{"uint16_be.nii", "uint16", "uint16", false, true, 0, 0},
		{"int32.nii.gz", "int32", "int32", true, false, 0, 0},
		{"float32_ext.nii.gz", "float32", "float32", true, false, 0, 0},
		{"int16_scaled.nii", "int16", "int16", false, false, 2, -6},
		{"label.nii.gz", "label", "uint8", true, false, 0, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			v, err := ReadVolume(filepath.Join("testdata", "nifti", tc.file), 0)
			if err != nil {
				t.Fatal(err)
			}
			if v.Dims != [3]int{7, 6, 5} || v.TypeName() != tc.typ || v.Gzip != tc.gz || (v.Order == binary.BigEndian) != tc.big ||
				v.Slope != tc.slope || v.Inter != tc.inter {
				t.Fatalf("dims %v type %s gzip %v order %v slope %g inter %g", v.Dims, v.TypeName(), v.Gzip, v.Order, v.Slope, v.Inter)
			}
			for z := range 5 {
				for y := range 6 {
					for x := range 7 {
						if got, want := v.At(x+7*(y+6*z)), fixtureValue(tc.kind, x, y, z); got != want {
							t.Fatalf("voxel (%d, %d, %d) = %g, want %g", x, y, z, got, want)
						}
					}
				}
			}
			pix := func(k int) float32 { return math.Float32frombits(v.Order.Uint32(v.Header[niftiPixdim+4*k:])) }
			if pix(1) != 0.75 || pix(2) != 0.8 || pix(3) != 2.5 || v.Header[niftiQform] != 1 && v.Header[niftiQform+1] != 1 {
				t.Errorf("pixdim %g %g %g, qform bytes %v", pix(1), pix(2), pix(3), v.Header[niftiQform:niftiQform+4])
			}
		})
	}
}

// TestWriteMaskVolume: a mask written like a volume has its geometry byte
// for byte (dims, pixdim, units, qform, sform) and reads back as written.
func TestWriteMaskVolume(t *testing.T) {
	for _, src := range []string{"int16.nii.gz", "uint16_be.nii"} {
		like, err := ReadVolume(filepath.Join("testdata", "nifti", src), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, top := range []uint16{3, 300} {
			labels := make([]uint16, like.Len())
			for k := range labels {
				labels[k] = uint16(k*7) % (top + 1)
			}
			for _, gz := range []bool{true, false} {
				var b bytes.Buffer
				if err := WriteMaskVolume(&b, like, labels, gz); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "m.nii")
				writeFile(t, path, b.Bytes())
				got, err := ReadVolume(path, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Geometry(), like.Geometry()) || got.Gzip != gz || got.Order != like.Order {
					t.Fatalf("%s max %d gz %v: geometry differs", src, top, gz)
				}
				want := "uint8"
				if top > 255 {
					want = "uint16"
				}
				if got.TypeName() != want {
					t.Errorf("type %s, want %s", got.TypeName(), want)
				}
				for k, l := range labels {
					if got.At(k) != float64(l) {
						t.Fatalf("voxel %d = %g, want %d", k, got.At(k), l)
					}
				}
			}
		}
	}
}

// niftiFile builds a NIfTI-1 file of the given dims and datatype holding
// vals (x fastest), for dataset tests (the reader itself is held to the
// Python-written fixtures).
func niftiFile(dims []int, datatype int, vals []float64, gz bool) []byte {
	var h [niftiHeaderSize]byte
	bo := binary.LittleEndian
	bo.PutUint32(h[0:], niftiHeaderSize)
	bo.PutUint16(h[niftiDim:], uint16(len(dims)))
	for k := range 7 {
		d := 1
		if k < len(dims) {
			d = dims[k]
		}
		bo.PutUint16(h[niftiDim+2+2*k:], uint16(d))
	}
	size := niftiTypes[datatype].bytes
	bo.PutUint16(h[niftiDatatype:], uint16(datatype))
	bo.PutUint16(h[niftiBitpix:], uint16(8*size))
	for k := range 8 {
		bo.PutUint32(h[niftiPixdim+4*k:], math.Float32bits(1))
	}
	bo.PutUint32(h[niftiVoxOff:], math.Float32bits(352))
	copy(h[niftiMagic:], "n+1\x00")
	out := append(h[:], 0, 0, 0, 0)
	for _, v := range vals {
		switch datatype {
		case niftiUint8:
			out = append(out, byte(v))
		case niftiInt16:
			out = bo.AppendUint16(out, uint16(int16(v)))
		case niftiUint16:
			out = bo.AppendUint16(out, uint16(v))
		case niftiFloat32:
			out = bo.AppendUint32(out, math.Float32bits(float32(v)))
		case niftiFloat64:
			out = bo.AppendUint64(out, math.Float64bits(v))
		default:
			panic("niftiFile: datatype")
		}
	}
	if !gz {
		return out
	}
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write(out)
	z.Close()
	return b.Bytes()
}

func TestNIfTIRefused(t *testing.T) {
	good := niftiFile([]int{4, 3, 2}, niftiInt16, make([]float64, 24), false)
	with := func(off int, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[off:], b)
		return c
	}
	nifti2 := bytes.Clone(good)
	binary.LittleEndian.PutUint32(nifti2, 540)
	gzBad := niftiFile([]int{4, 3, 2}, niftiInt16, make([]float64, 24), true)
	gzBad = gzBad[:len(gzBad)-12]
	huge := with(niftiDim+2, 0xff, 0x7f, 0xff, 0x7f, 0xff, 0x7f) // 32767^3 voxels
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated header", good[:200], "truncated (it ends inside the 348-byte NIfTI header)"},
		{"truncated voxels", good[:len(good)-3], "truncated (its header puts 4x3x2 voxels, 48 bytes, after byte 352, and the file has 397 bytes)"},
		{"truncated gzip", gzBad, "truncated"},
		{"NIfTI-2", nifti2, "NIfTI-2"},
		{"not NIfTI", []byte(strings.Repeat("x", 400)), "not a NIfTI-1 file"},
		{"hdr/img pair", with(niftiMagic, 'n', 'i', '1', 0), ".hdr/.img pair"},
		{"bad magic", with(niftiMagic, 'a', 'b', 'c', 0), "magic \"abc\""},
		{"4D series", with(niftiDim, 4, 0, 4, 0, 3, 0, 2, 0, 5, 0), "4D image (4x3x2x5)"},
		{"zero size", with(niftiDim+2, 0, 0), "a size of 0 along dimension 1"},
		{"datatype", with(niftiDatatype, 32, 0), "datatype 32"},
		{"bitpix", with(niftiBitpix, 8, 0), "bitpix 8"},
		{"vox_offset", with(niftiVoxOff, 0, 0, 0x80, 0x3f), "vox_offset 1"},
		{"too many voxels", huge, "more than the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.nii")
			writeFile(t, path, tc.b)
			_, err := ReadVolume(path, 1<<20)
			if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ReadVolume(filepath.Join(t.TempDir(), "none.nii"), 0); err == nil || !strings.Contains(err.Error(), "none.nii") {
		t.Errorf("missing file: %v", err)
	}
}

// niftiSet writes a nifti dataset of n volumes dims each: int16 images of
// varied ranges and uint8 masks whose slice z holds class z%3 in a square
// (slice 0 of each volume is empty).
func writeNIfTISet(t *testing.T, dir string, n int, dims []int) {
	nv := dims[0] * dims[1] * dims[2]
	for i := range n {
		img, mask := make([]float64, nv), make([]float64, nv)
		for k := range nv {
			x, y, z := k%dims[0], k/dims[0]%dims[1], k/(dims[0]*dims[1])
			img[k] = float64((x*7+y*13+z*29+i*5)%97*(i+1)*10 - 300)
			if x >= 1 && x < 4 && y >= 1 && y < 3 {
				mask[k] = float64(z % 3)
			}
		}
		name := fmt.Sprintf("case%d.nii.gz", i)
		writeFile(t, filepath.Join(dir, "images", name), niftiFile(dims, niftiInt16, img, true))
		writeFile(t, filepath.Join(dir, "masks", name), niftiFile(dims, niftiUint8, mask, i%2 == 0))
		if i%2 == 1 { // a mask may be .nii where its volume is .nii.gz
			os.Rename(filepath.Join(dir, "masks", name), filepath.Join(dir, "masks", strings.TrimSuffix(name, ".gz")))
		}
	}
}

func niftiConfig(dir string) SourceConfig {
	return SourceConfig{Config: Config{Source: SourceNIfTI, Path: dir, ValFraction: 0.34, Seed: 1, NIfTI: NIfTIConfig{Axis: 2}}, Channels: 1, Classes: 3}
}

func TestNIfTISet(t *testing.T) {
	dir := t.TempDir()
	dims := []int{8, 6, 5}
	writeNIfTISet(t, dir, 3, dims)
	cfg := niftiConfig(dir)
	rep, err := Check(cfg)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("%v %v", err, rep.Problems)
	}
	var text strings.Builder
	rep.Write(&text)
	for _, want := range []string{"images: NIfTI-1 int16 8x6x5 (.nii.gz) (3 images", "NIfTI-1 uint8 8x6x5 (.nii.gz)", "samples: 15 (train 10, val 5"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	set := mustOpen(t, cfg)
	// The split is by volume: a volume's slices are all train or all val.
	vol := func(i int) string { return strings.Split(SampleName(set.Data, i), "_")[0] }
	trainVols := map[string]bool{}
	for _, i := range set.Train {
		trainVols[vol(i)] = true
	}
	for _, i := range set.Val {
		if trainVols[vol(i)] {
			t.Errorf("volume %s has slices in both train and val", vol(i))
		}
	}
	if h, w := set.Data.Size(); h != 6 || w != 8 || SampleName(set.Data, 7) != "case1_z002" {
		t.Errorf("size %dx%d, sample 7 %q", h, w, SampleName(set.Data, 7))
	}
	// Values: the volume's min..max windowed to 16 bits, then normalized.
	img, mask := make([]float32, 48), make([]uint8, 48)
	if err := set.Data.Sample(7, img, mask); err != nil {
		t.Fatal(err)
	}
	v, err := ReadVolume(filepath.Join(dir, "images", "case1.nii.gz"), 0)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for k := range v.Len() {
		lo, hi = min(lo, v.At(k)), max(hi, v.At(k))
	}
	for y := range 6 {
		for x := range 8 {
			q := math.Round((v.At(x+8*(y+6*2)) - lo) / (hi - lo) * 65535)
			want := (float32(q)/65535 - Mean) / Std
			if img[y*8+x] != want {
				t.Fatalf("pixel (%d, %d) = %v, want %v", x, y, img[y*8+x], want)
			}
			c := uint8(0)
			if x >= 1 && x < 4 && y >= 1 && y < 3 {
				c = 2
			}
			if mask[y*8+x] != c {
				t.Fatalf("mask (%d, %d) = %d, want %d", x, y, mask[y*8+x], c)
			}
		}
	}

	// A window clamps; skip_empty drops slices 0 and 3 (class 0 only); axis 0 slices are 5x6.
	cfg.NIfTI = NIfTIConfig{Axis: 0, SkipEmpty: true, Window: []float64{0, 100}}
	set = mustOpen(t, cfg)
	if h, w := set.Data.Size(); h != 5 || w != 6 || set.Data.Len() != 3*3 {
		t.Fatalf("axis 0: %dx%d, %d slices", h, w, set.Data.Len())
	}
	cfg.NIfTI = NIfTIConfig{Axis: 2, SkipEmpty: true, Window: []float64{0, 100}}
	set = mustOpen(t, cfg)
	if set.Data.Len() != 3*3 || SampleName(set.Data, 0) != "case0_z001" || SampleName(set.Data, 2) != "case0_z004" {
		t.Fatalf("skip_empty: %d slices, first %q", set.Data.Len(), SampleName(set.Data, 0))
	}
	if err := set.Data.Sample(0, img, mask); err != nil {
		t.Fatal(err)
	}
	for _, x := range img {
		if x < (0-Mean)/Std || x > (1-Mean)/Std {
			t.Fatalf("windowed value %v outside [0, 1]", x)
		}
	}
	if !slices.Contains(img, (0-Mean)/Std) || !slices.Contains(img, (1-Mean)/Std) {
		t.Errorf("window [0, 100] clamps nothing in %v", img)
	}
}

func TestNIfTISetProblems(t *testing.T) {
	dir := t.TempDir()
	dims := []int{8, 6, 5}
	writeNIfTISet(t, dir, 4, dims)
	// A mask of other dims, a mask with a fraction, a volume without a mask.
	writeFile(t, filepath.Join(dir, "masks", "case1.nii"), niftiFile([]int{8, 6, 4}, niftiUint8, make([]float64, 8*6*4), false))
	frac := make([]float64, 8*6*5)
	frac[17] = 1.5
	os.Remove(filepath.Join(dir, "masks", "case2.nii.gz"))
	writeFile(t, filepath.Join(dir, "masks", "case2.nii.gz"), niftiFile(dims, niftiFloat32, frac, true))
	os.Remove(filepath.Join(dir, "masks", "case3.nii"))
	writeFile(t, filepath.Join(dir, "masks", "notes.txt"), []byte("x"))
	rep, err := Check(niftiConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	rep.Write(&text)
	for _, want := range []string{
		"case1.nii is 8x6x4 voxels but its volume", "case1.nii.gz is 8x6x5; a mask volume must have its volume's dims",
		"case2.nii.gz: voxel (1, 2, 0) holds 1.5, not a label",
		"case3.nii.gz: has no mask: looked for", "notes.txt: ignored: not a .nii or .nii.gz file",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	cfg := niftiConfig(dir)
	cfg.Channels = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "model.in_channels: 0") {
		t.Errorf("0 channels: %v", err)
	}
	for _, tc := range []struct {
		window []float64
		want   string
	}{
		{[]float64{5, 1}, "data.nifti.window: [5 1]: lo must be below hi"},
		{[]float64{math.Inf(-1), 1}, "lo must be below hi, both finite"},
		{[]float64{-1e308, 1e308}, "data.nifti.window: [-1e+308 1e+308]: hi - lo overflows float64; give the range of intensities that matters"},
	} {
		cfg = niftiConfig(dir)
		cfg.NIfTI.Window = tc.window
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("window %v: %v, want %q", tc.window, err, tc.want)
		}
	}
}

// FuzzNIfTI: arbitrary bytes never panic the reader, nor make it allocate
// more than the header allows, and an error says what is wrong.
func FuzzNIfTI(f *testing.F) {
	for _, name := range []string{"uint8.nii", "float32_ext.nii.gz", "uint16_be.nii"} {
		b, err := os.ReadFile(filepath.Join("testdata", "nifti", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add(niftiFile([]int{3, 2}, niftiFloat32, make([]float64, 6), false))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := readVolume(bufio.NewReader(bytes.NewReader(b)), 1<<12, int64(len(b)))
		if err != nil {
			if v != nil || err.Error() == "" {
				t.Fatalf("error %v with volume", err)
			}
			return
		}
		for k := range v.Len() {
			v.At(k)
		}
		h, w := v.SliceSize(2)
		if h*w*v.Slices(2) != v.Len() {
			t.Fatalf("slices %dx%dx%d of %d voxels", h, w, v.Slices(2), v.Len())
		}
	})
}

// TestVolumeCache: a volume asked for at once by many goroutines loads
// once; past the budget the least recently used volume goes, never the
// one just asked for; a failed load is tried again.
func TestVolumeCache(t *testing.T) {
	c := newVolumeCache(2 * 30) // two volumes of 10 voxels (3 bytes each)
	var loads [4]atomic.Int64
	load := func(k int) func() (*volumeEntry, error) {
		return func() (*volumeEntry, error) {
			loads[k].Add(1)
			return &volumeEntry{img: make([]uint16, 10), cls: make([]uint8, 10)}, nil
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { c.get(0, load(0)) })
	}
	wg.Wait()
	for _, k := range []int{1, 0, 2, 0, 1} { // 2 evicts 1 (0 was used since); 1 evicts 2
		c.get(k, load(k))
	}
	if got := [3]int64{loads[0].Load(), loads[1].Load(), loads[2].Load()}; got != [3]int64{1, 2, 1} {
		t.Errorf("loads %v, want [1 2 1]", got)
	}
	if c.used > c.budget {
		t.Errorf("%d bytes kept, budget %d", c.used, c.budget)
	}
	fail := true
	for range 2 {
		_, err := c.get(3, func() (*volumeEntry, error) {
			if fail {
				fail = false
				return nil, fmt.Errorf("boom")
			}
			return &volumeEntry{}, nil
		})
		if err != nil && fail {
			t.Fatal("error after success")
		}
	}
	if _, ok := c.entries[3]; !ok {
		t.Errorf("a retried load is not kept")
	}
}
