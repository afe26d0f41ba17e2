package data

import (
	"bytes"
	"image"
	"image/color"
	"strings"
	"testing"
)

// fuzzMaxPixels keeps fuzzed headers from asking for big pictures.
const fuzzMaxPixels = 1 << 16

// decodeSeeds are valid PNG (gray, palette, RGBA, 16-bit), GIF and JPEG
// files and broken versions of them.
func decodeSeeds(f testing.TB) [][]byte {
	img, cls := scene(1, 12, 10, 3)
	gray := image.NewGray(image.Rect(0, 0, 10, 12))
	copy(gray.Pix, cls)
	pal := image.NewPaletted(image.Rect(0, 0, 10, 12), vocPalette())
	copy(pal.Pix, cls)
	pal.Pix[5] = 255
	g16 := image.NewGray16(image.Rect(0, 0, 3, 2))
	g16.SetGray16(1, 1, color.Gray16{Y: 0xff00})
	nrgba := image.NewNRGBA(image.Rect(0, 0, 4, 4))
	nrgba.Pix[3], nrgba.Pix[4], nrgba.Pix[7] = 128, 9, 255
	var seeds [][]byte
	for _, b := range [][]byte{
		encodePNG(f, img), encodePNG(f, gray), encodePNG(f, pal), encodePNG(f, g16), encodePNG(f, nrgba),
		encodeGIF(f, pal), encodeJPEG(f, img),
	} {
		seeds = append(seeds, b, b[:len(b)/2], b[:min(len(b), 40)])
		c := bytes.Clone(b)
		c[len(c)/2] ^= 0xff
		seeds = append(seeds, c)
	}
	return append(seeds, nil, []byte("GIF89a"), []byte("\x89PNG\r\n\x1a\n"), []byte("\xff\xd8\xff"))
}

// FuzzDecodeImage: decoding arbitrary bytes as an image never panics; an
// error names the file; a picture comes out at (0, 0), opaque, of the
// header's size, gray when asked.
func FuzzDecodeImage(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, gray bool) {
		channels := 3
		if gray {
			channels = 1
		}
		m, err := decodeImage("fuzz.png", b, channels, fuzzMaxPixels)
		if err != nil {
			if m != nil || !strings.HasPrefix(err.Error(), "fuzz.png: ") {
				t.Fatalf("error %q with picture %v", err, m != nil)
			}
			return
		}
		r := m.Bounds()
		if r.Min != (image.Point{}) || r.Empty() || r.Dx()*r.Dy() > fuzzMaxPixels {
			t.Fatalf("bounds %v", r)
		}
		cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
		if err != nil || cfg.Width < r.Dx() || cfg.Height < r.Dy() {
			t.Fatalf("picture %v larger than its header %dx%d (%v)", r, cfg.Width, cfg.Height, err)
		}
		for p := 0; p < len(m.Pix); p += 4 {
			if m.Pix[p+3] != 255 || (gray && (m.Pix[p] != m.Pix[p+1] || m.Pix[p] != m.Pix[p+2])) {
				t.Fatalf("pixel %d is %v", p/4, m.Pix[p:p+4])
			}
		}
		out := make([]float32, channels*r.Dx()*r.Dy())
		normalize8(m, channels, out)
		for _, v := range out {
			if !(v >= -2 && v <= 2) {
				t.Fatalf("normalized value %v outside [-2, 2]", v)
			}
		}
	})
}

// FuzzDecodeMask: decoding arbitrary bytes as a mask and mapping it to
// classes never panics; errors name the file; the values come out one per
// pixel, and mapped classes are below the class count or Ignore.
func FuzzDecodeMask(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, classes uint8) {
		m, err := decodeMask("fuzz.gif", b, fuzzMaxPixels)
		raw, w, h := m.values(), m.w, m.h
		if err != nil {
			if raw != nil || !strings.HasPrefix(err.Error(), "fuzz.gif: ") {
				t.Fatalf("error %q with values", err)
			}
			return
		}
		if w < 1 || h < 1 || len(raw) != w*h {
			t.Fatalf("%d values for %dx%d", len(raw), w, h)
		}
		if (m.bits != 8 && m.bits != 16) || m.format == "" {
			t.Fatalf("bits %d, format %q", m.bits, m.format)
		}
		for _, v := range raw {
			if m.bits == 8 && v > 255 {
				t.Fatalf("8-bit mask holds %d", v)
			}
		}
		// VOC mapping: values below classes are classes, 255 ignored.
		k := max(int(classes), 2)
		lut := make([]int16, MaxMaskValue+1)
		for v := range lut {
			lut[v] = -1
			if v < k {
				lut[v] = int16(v)
			}
		}
		lut[255] = int16(Ignore)
		fs := &files{lut: lut, classes: k, mapDesc: "fuzz"}
		for _, v := range raw {
			c := fs.lut[v]
			if c >= 0 && c != int16(Ignore) && int(c) >= k {
				t.Fatalf("value %d mapped to class %d of %d", v, c, k)
			}
		}
	})
}

// The fuzzers' seeds as a plain test: the valid files decode to what was
// written, every broken one is an error naming the file.
func TestDecodeSeeds(t *testing.T) {
	img, cls := scene(1, 12, 10, 3)
	pal := image.NewPaletted(image.Rect(0, 0, 10, 12), vocPalette())
	copy(pal.Pix, cls)
	pal.Pix[5] = 255
	mp, err := decodeMask("m.png", encodePNG(t, pal), fuzzMaxPixels)
	if err != nil || mp.w != 10 || mp.h != 12 || mp.values()[5] != 255 || mp.values()[6] != uint16(cls[6]) || mp.bits != 8 || mp.format != "8-bit palette PNG" {
		t.Fatalf("palette PNG: %v %dx%d %d-bit %q", err, mp.w, mp.h, mp.bits, mp.format)
	}
	mp, err = decodeMask("m.gif", encodeGIF(t, pal), fuzzMaxPixels)
	if err != nil || mp.values()[5] != 255 || mp.values()[7] != uint16(cls[7]) || mp.format != "palette GIF" {
		t.Fatalf("palette GIF: %v %q", err, mp.format)
	}
	// 16-bit gray is read by value, not by its high byte.
	g16 := image.NewGray16(image.Rect(0, 0, 3, 2))
	g16.SetGray16(1, 1, color.Gray16{Y: 0x0300})
	g16.SetGray16(2, 1, color.Gray16{Y: 0x0101})
	mp, err = decodeMask("m16.png", encodePNG(t, g16), fuzzMaxPixels)
	if err != nil || mp.values()[4] != 0x0300 || mp.values()[5] != 257 || mp.bits != 16 || mp.format != "16-bit gray PNG" {
		t.Fatalf("16-bit gray: %v %v %d-bit %q", err, mp.values(), mp.bits, mp.format)
	}
	m, err := decodeImage("i.png", encodePNG(t, img), 3, fuzzMaxPixels)
	if err != nil || !bytes.Equal(m.Pix, img.Pix) {
		t.Fatalf("RGBA PNG: %v", err)
	}
	// Transparent pixels keep their color.
	nrgba := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	copy(nrgba.Pix, []uint8{200, 100, 50, 0, 10, 20, 30, 128})
	m, err = decodeImage("a.png", encodePNG(t, nrgba), 3, fuzzMaxPixels)
	if err != nil || !bytes.Equal(m.Pix, []uint8{200, 100, 50, 255, 10, 20, 30, 255}) {
		t.Fatalf("NRGBA PNG: %v %v", err, m.Pix)
	}
	big := image.NewGray(image.Rect(0, 0, 300, 300))
	if _, err := decodeImage("big.png", encodePNG(t, big), 3, fuzzMaxPixels); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("over the pixel limit: %v", err)
	}
	for k, s := range decodeSeeds(t) {
		_, err := decodeImage("s.png", s, 3, fuzzMaxPixels)
		if err != nil && !strings.HasPrefix(err.Error(), "s.png: ") {
			t.Errorf("seed %d: error %q does not name the file", k, err)
		}
		if k%4 == 1 && err == nil { // truncated to half
			t.Errorf("seed %d (truncated) decoded", k)
		}
	}
}

// values is every raw value of the mask, row-major (nil for none).
func (m maskPixels) values() []uint16 {
	if m.img == nil {
		return nil
	}
	out := make([]uint16, m.w*m.h)
	for y := range m.h {
		if err := rawRow(m.name, m.img, y, out[y*m.w:(y+1)*m.w]); err != nil {
			panic(err)
		}
	}
	return out
}
