package data

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/image/tiff/lzw"
)

// TestLZWTIFFWriter holds the tests' LZW writer to x/image's TIFF LZW
// reader on data long enough to widen the codes to 12 bits and fill the
// table twice, so a reader test failing on LZW points at the reader.
func TestLZWTIFFWriter(t *testing.T) {
	data := make([]byte, 40000)
	for k := range data {
		data[k] = byte(mix64(uint64(k/7)) % 23) // runs and repeats: long codes
	}
	for _, d := range [][]byte{data, data[:1], data[:2], []byte("TOBEORNOTTOBEORTOBEORNOT#")} {
		r := lzw.NewReader(bytes.NewReader(lzwTIFF(d)), lzw.MSB, 8)
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("%d bytes: round trip gives %d bytes, err %v", len(d), len(got), err)
		}
	}
}

// tiffPixels makes w*h*samples values of the given depth that use every
// bit (high and low bytes differ), and a palette for photometric 3.
func tiffPixels(w, h, samples, bits int, seed uint64) []uint16 {
	pix := make([]uint16, w*h*samples)
	for k := range pix {
		v := mix64(seed<<32 | uint64(k))
		if k%5 == 0 { // runs, so PackBits repeats and LZW strings occur
			v = uint64(k / 10)
		}
		pix[k] = uint16(v) >> (16 - bits)
	}
	return pix
}

func tiffPalette(n int) []uint16 {
	p := make([]uint16, 3*n)
	for k := range n {
		p[k], p[n+k], p[2*n+k] = uint16(k*257), uint16((255-k)*257), uint16(k*97%256*257)
	}
	return p
}

// wantColor is the color the spec's pixel (x, y) stands for.
func (s tiffSpec) wantColor(x, y int) color.Color {
	v := s.pix[(y*s.w+x)*s.samples:]
	switch {
	case s.photometric == 3:
		n := len(s.palette) / 3
		return color.RGBA64{s.palette[v[0]], s.palette[n+int(v[0])], s.palette[2*n+int(v[0])], 0xffff}
	case s.samples == 3 && s.bits == 16:
		return color.RGBA64{v[0], v[1], v[2], 0xffff}
	case s.samples == 3:
		return color.RGBA{uint8(v[0]), uint8(v[1]), uint8(v[2]), 255}
	case s.bits == 16 && s.photometric == 0:
		return color.Gray16{0xffff - v[0]}
	case s.bits == 16:
		return color.Gray16{v[0]}
	case s.photometric == 0:
		return color.Gray{255 - uint8(v[0])}
	}
	return color.Gray{uint8(v[0])}
}

// tiffCases are the layouts the reader must read: every depth, kind,
// compression, strips and tiles (tiles overhanging the image), both byte
// orders, the predictor.
func tiffCases() map[string]tiffSpec {
	const w, h = 20, 19 // not multiples of the 16-pixel tiles
	cases := map[string]tiffSpec{
		"gray8 none":                {samples: 1, bits: 8, photometric: 1},
		"gray8 white-is-zero":       {samples: 1, bits: 8, photometric: 0, rowsPerStrip: 4},
		"gray8 LZW strips":          {samples: 1, bits: 8, photometric: 1, compression: 5, rowsPerStrip: 3},
		"gray8 LZW predictor tiled": {samples: 1, bits: 8, photometric: 1, compression: 5, predictor: 2, tileW: 16, tileH: 16},
		"gray16 none big-endian":    {samples: 1, bits: 16, photometric: 1, bigEndian: true},
		"gray16 LZW predictor":      {samples: 1, bits: 16, photometric: 1, compression: 5, predictor: 2, rowsPerStrip: 5},
		"gray16 Deflate tiled":      {samples: 1, bits: 16, photometric: 1, compression: 8, tileW: 16, tileH: 16, bigEndian: true},
		"gray16 PackBits":           {samples: 1, bits: 16, photometric: 1, compression: 32773, rowsPerStrip: 7},
		"gray16 white-is-zero":      {samples: 1, bits: 16, photometric: 0},
		"RGB8 none tiled":           {samples: 3, bits: 8, photometric: 2, tileW: 16, tileH: 16},
		"RGB8 Deflate predictor":    {samples: 3, bits: 8, photometric: 2, compression: 8, predictor: 2},
		"RGB8 PackBits":             {samples: 3, bits: 8, photometric: 2, compression: 32773, rowsPerStrip: 2},
		"RGB16 LZW big-endian":      {samples: 3, bits: 16, photometric: 2, compression: 5, bigEndian: true},
		"RGB16 LZW predictor tiled": {samples: 3, bits: 16, photometric: 2, compression: 5, predictor: 2, tileW: 16, tileH: 32},
		"palette8 LZW":              {samples: 1, bits: 8, photometric: 3, compression: 5},
		"palette8 PackBits tiled":   {samples: 1, bits: 8, photometric: 3, compression: 32773, tileW: 16, tileH: 16},
	}
	seed := uint64(0)
	for name, c := range cases {
		seed++
		c.w, c.h = w, h
		c.pix = tiffPixels(w, h, c.samples, c.bits, seed)
		if c.photometric == 3 {
			c.palette = tiffPalette(256)
		}
		cases[name] = c
	}
	return cases
}

func TestTIFFLayouts(t *testing.T) {
	for name, c := range tiffCases() {
		t.Run(name, func(t *testing.T) {
			b := c.bytes()
			m, format, err := decodeFile("x.tif", b, MaxImagePixels)
			if err != nil {
				t.Fatal(err)
			}
			if format != "tiff" || m.Bounds() != image.Rect(0, 0, c.w, c.h) {
				t.Fatalf("format %q, bounds %v", format, m.Bounds())
			}
			for y := range c.h {
				for x := range c.w {
					gr, gg, gb, ga := m.At(x, y).RGBA()
					wr, wg, wb, wa := c.wantColor(x, y).RGBA()
					if [4]uint32{gr, gg, gb, ga} != [4]uint32{wr, wg, wb, wa} {
						t.Fatalf("pixel (%d, %d): got %v, want %v", x, y, m.At(x, y), c.wantColor(x, y))
					}
				}
			}
			if got := is16(m); got != (c.bits == 16 && c.photometric != 3) {
				t.Errorf("is16 = %v", got)
			}
			info, err := tiffHeader(b)
			if err != nil || info.pages != 1 {
				t.Fatalf("header: %+v, %v", info, err)
			}
			f := info.format()
			for _, part := range []string{fmt.Sprintf("%d-bit", c.bits), "TIFF", map[bool]string{true: "tiled 16x", false: "striped"}[c.tileW > 0],
				map[int]string{0: "uncompressed", 5: "LZW", 8: "Deflate", 32773: "PackBits"}[c.compression]} {
				if !strings.Contains(f, part) {
					t.Errorf("format %q lacks %q", f, part)
				}
			}
		})
	}
}

// TestTIFF16Normalized: a 16-bit image keeps its 16 bits through Sample
// (v = p/65535, then (v-Mean)/Std or data.mean/std), also resized, and
// data check names its format and depth.
func TestTIFF16Normalized(t *testing.T) {
	dir := t.TempDir()
	const h, w = 16, 16
	specs := map[string]tiffSpec{}
	for i := range 3 {
		img := tiffSpec{w: w, h: h, samples: 1, bits: 16, photometric: 1, compression: 5, predictor: 2, tileW: 16, tileH: 16}
		img.pix = tiffPixels(w, h, 1, 16, uint64(i))
		mask := tiffSpec{w: w, h: h, samples: 1, bits: 8, photometric: 3, compression: 32773, palette: tiffPalette(256)}
		mask.pix = make([]uint16, w*h)
		for k := range mask.pix {
			mask.pix[k] = uint16(k % 3 % (i + 1)) // classes 0..2
		}
		name := fmt.Sprintf("s%d", i)
		specs[name] = img
		writeFile(t, filepath.Join(dir, "images", name+".tif"), img.bytes())
		writeFile(t, filepath.Join(dir, "masks", name+".tiff"), mask.bytes())
	}
	cfg := folderConfig(dir)
	cfg.Channels, cfg.Classes, cfg.ValFraction = 1, 3, 0.34
	rep, err := Check(cfg)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check: %v %v", err, rep.Problems)
	}
	var text strings.Builder
	rep.Write(&text)
	for _, want := range []string{"images: 16-bit gray TIFF (tiled 16x16, LZW) (3 images; values read whole", "masks: 8-bit palette TIFF (striped, PackBits) (3 masks)", "16x16: 3"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	for _, tc := range []struct {
		name      string
		mean, std []float64
		resize    []int
	}{{"default", nil, nil, nil}, {"mean/std", []float64{0.01}, []float64{0.002}, nil}, {"resized to its size", nil, nil, []int{h, w}}} {
		cfg := cfg
		cfg.Mean, cfg.Std, cfg.Resize = tc.mean, tc.std, tc.resize
		set := mustOpen(t, cfg)
		img, mask := make([]float32, h*w), make([]uint8, h*w)
		for i := range set.Data.Len() {
			if err := set.Data.Sample(i, img, mask); err != nil {
				t.Fatal(err)
			}
			spec := specs[SampleName(set.Data, i)]
			m, s := float32(Mean), float32(Std)
			for k, p := range spec.pix {
				v := float32(p) / 65535
				want := (v - m) / s
				if tc.mean != nil { // Normalize's affine map of the default normalization
					a, b := float32(Std/tc.std[0]), float32((Mean-tc.mean[0])/tc.std[0])
					want = want*a + b
				}
				if img[k] != want {
					t.Fatalf("%s: sample %d value %d: got %v, want %v (raw %d)", tc.name, i, k, img[k], want, p)
				}
			}
		}
	}
	// Scaling a 16-bit image keeps more than 8 bits: neighbours 1/65535 apart stay apart.
	cfg.Resize = []int{8, 8}
	set := mustOpen(t, cfg)
	img, mask := make([]float32, 64), make([]uint8, 64)
	if err := set.Data.Sample(0, img, mask); err != nil {
		t.Fatal(err)
	}
	fine := 0
	for _, v := range img {
		if q := float64(v*Std+Mean) * 255; q != float64(int(q)) {
			fine++
		}
	}
	if fine == 0 {
		t.Errorf("resized 16-bit samples are all on the 8-bit grid: %v", img[:8])
	}
}

// TestTIFFRefused: what the reader cannot read right is refused by name,
// saying what to do; data check lists every such file.
func TestTIFFRefused(t *testing.T) {
	base := func() tiffSpec {
		s := tiffSpec{w: 16, h: 16, samples: 1, bits: 8, photometric: 1}
		s.pix = tiffPixels(16, 16, 1, 8, 1)
		return s
	}
	rgb := base()
	rgb.samples, rgb.photometric, rgb.pix = 3, 2, tiffPixels(16, 16, 3, 8, 2)
	with := func(s tiffSpec, e ...tiffEntry) []byte { s.extra = e; return s.bytes() }
	pages := base()
	pages.pages = 3
	pyramid := base()
	pyramid.pages, pyramid.reduced = 2, true
	full := base().bytes()
	big := bytes.Clone(full)
	big[2] = 43
	cases := []struct {
		name string
		b    []byte
		want []string
	}{
		{"pages", pages.bytes(), []string{"multi-page TIFF (3 pages, a stack", "one image per file", "own TIFF"}},
		{"pyramid", pyramid.bytes(), []string{"multi-page TIFF (2 pages, a pyramid"}},
		{"planar", with(rgb, tiffEntry{284, 3, []uint32{2}}), []string{"separate planes", "interleaved"}},
		{"signed", with(base(), tiffEntry{339, 3, []uint32{2}}), []string{"signed integer samples", "16-bit unsigned"}},
		{"float", with(base(), tiffEntry{339, 3, []uint32{3}}), []string{"floating-point samples", "convert it"}},
		{"jpeg", with(base(), tiffEntry{259, 3, []uint32{7}}), []string{"JPEG (Compression 7)", "LZW, Deflate or PackBits"}},
		{"unknown compression", with(base(), tiffEntry{259, 3, []uint32{9}}), []string{"an unknown compression (Compression 9)"}},
		{"4-bit", with(base(), tiffEntry{258, 3, []uint32{4}}), []string{"4 bits per sample", "reads 1, 8 and 16"}},
		{"CMYK", with(rgb, tiffEntry{262, 3, []uint32{5}}), []string{"CMYK TIFF"}},
		{"gray+alpha", with(rgb, tiffEntry{258, 3, []uint32{8, 8}}, tiffEntry{262, 3, []uint32{1}}, tiffEntry{277, 3, []uint32{2}}), []string{"gray+alpha TIFF with 2 samples"}},
		{"BigTIFF", big, []string{"BigTIFF"}},
		{"truncated header", full[:6], []string{"truncated"}},
		{"truncated pixels", full[:len(full)-150], []string{"truncated"}},
		{"directory past the end", full[:len(full)/2], []string{"truncated"}},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Join(dir, c.name+".tif")
			_, _, err := decodeFile(name, c.b, MaxImagePixels)
			if err == nil {
				t.Fatal("decoded")
			}
			if !strings.HasPrefix(err.Error(), name+": ") {
				t.Errorf("error does not start with the file: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
	// data check lists them all, each by name.
	for k, c := range cases {
		writeFile(t, filepath.Join(dir, "set", "images", fmt.Sprintf("%02d.tif", k)), c.b)
		writeFile(t, filepath.Join(dir, "set", "masks", fmt.Sprintf("%02d.tif", k)), base().bytes())
	}
	cfg := folderConfig(filepath.Join(dir, "set"))
	cfg.Channels = 1
	rep, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Fatal()); n != len(cases) {
		t.Errorf("data check lists %d errors for %d bad files: %v", n, len(cases), rep.Problems)
	}
}

// FuzzTIFF: arbitrary bytes after a TIFF signature never panic the
// header reader or the decoders, and an error names the file.
func FuzzTIFF(f *testing.F) {
	for _, c := range tiffCases() {
		c.w, c.h = 9, 8
		c.pix = c.pix[:9*8*c.samples]
		if c.tileW > 0 {
			c.tileW, c.tileH = 8, 8
		}
		b := c.bytes()
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tiffHeader(b)
		for _, gray := range []bool{true, false} {
			if m, err := decodeImage("f.tif", b, map[bool]int{true: 1, false: 3}[gray], fuzzMaxPixels); err != nil {
				if m != nil || !strings.HasPrefix(err.Error(), "f.tif: ") {
					t.Fatalf("error %q with picture %v", err, m != nil)
				}
			}
		}
		if m, _, err := decodeFile("f.tif", b, fuzzMaxPixels); err == nil {
			toDeep(m, true)
			toDeep(m, false)
		}
		decodeMask("f.tif", b, fuzzMaxPixels)
	})
}
