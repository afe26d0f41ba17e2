package data

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"math"
	"math/rand/v2"
	"testing"
)

// toRGBAWhole is toRGBA as it was before it converted in place: a new
// picture, drawn whole. The row-by-row, in-place conversion must give its
// bytes for every kind of picture the decoders make.
// toRGBA converts a decoded image into a new RGBA picture at (0, 0) with
// opaque alpha. With gray set, R, G and B all hold the luma (ITU-R 601, as
// color.GrayModel and PIL's convert("L") compute it). Transparency is
// ignored: a non-premultiplied pixel keeps its color (PIL's convert("RGB")).
func toRGBAWhole(src image.Image, gray bool) *image.RGBA {
	b := src.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	switch s := src.(type) {
	case *image.NRGBA:
		for y := range b.Dy() {
			copy(dst.Pix[y*dst.Stride:y*dst.Stride+4*b.Dx()], s.Pix[y*s.Stride:y*s.Stride+4*b.Dx()])
		}
	case *image.Gray:
		for y := range b.Dy() {
			row := s.Pix[y*s.Stride : y*s.Stride+b.Dx()]
			for x, v := range row {
				p := y*dst.Stride + 4*x
				dst.Pix[p], dst.Pix[p+1], dst.Pix[p+2] = v, v, v
			}
		}
	default:
		draw.Draw(dst, dst.Rect, src, b.Min, draw.Src)
		if hasAlpha(src) {
			// draw premultiplied the colors by alpha; take them unmultiplied.
			for y := range b.Dy() {
				for x := range b.Dx() {
					c := color.NRGBAModel.Convert(src.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
					p := y*dst.Stride + 4*x
					dst.Pix[p], dst.Pix[p+1], dst.Pix[p+2] = c.R, c.G, c.B
				}
			}
		}
	}
	for p := 0; p < len(dst.Pix); p += 4 {
		if gray {
			// color.GrayModel's weights: (19595 R + 38470 G + 7471 B) / 65536.
			r, g, bl := uint32(dst.Pix[p]), uint32(dst.Pix[p+1]), uint32(dst.Pix[p+2])
			y := uint8((19595*r + 38470*g + 7471*bl + 1<<15) >> 16)
			dst.Pix[p], dst.Pix[p+1], dst.Pix[p+2] = y, y, y
		}
		dst.Pix[p+3] = 255
	}
	return dst
}

// toDeepWhole is toDeep as it was before it converted in place and by
// rows.
// toDeep converts a decoded picture as toRGBA does, keeping 16 bits per
// channel where it has them: an *image.RGBA for 8-bit pictures, else an
// *image.RGBA64 (opaque, at (0, 0); with gray set R, G and B hold the
// luma, color.Gray16Model's weights).
func toDeepWhole(src image.Image, gray bool) image.Image {
	if !is16(src) {
		return toRGBAWhole(src, gray)
	}
	b := src.Bounds()
	dst := image.NewRGBA64(image.Rect(0, 0, b.Dx(), b.Dy()))
	if g, ok := src.(*image.Gray16); ok {
		for y := range b.Dy() {
			row := g.Pix[y*g.Stride : y*g.Stride+2*b.Dx()]
			for x := range b.Dx() {
				p := y*dst.Stride + 8*x
				for ch := range 3 {
					dst.Pix[p+2*ch], dst.Pix[p+2*ch+1] = row[2*x], row[2*x+1]
				}
			}
		}
	} else {
		for y := range b.Dy() {
			for x := range b.Dx() {
				// Colors unmultiplied by alpha, as toRGBA takes them.
				c := color.NRGBA64Model.Convert(src.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				dst.SetRGBA64(x, y, color.RGBA64{R: c.R, G: c.G, B: c.B})
			}
		}
	}
	for p := 0; p < len(dst.Pix); p += 8 {
		if gray {
			r, g, bl := uint32(dst.Pix[p])<<8|uint32(dst.Pix[p+1]), uint32(dst.Pix[p+2])<<8|uint32(dst.Pix[p+3]), uint32(dst.Pix[p+4])<<8|uint32(dst.Pix[p+5])
			y := (19595*r + 38470*g + 7471*bl + 1<<15) >> 16
			for ch := range 3 {
				dst.Pix[p+2*ch], dst.Pix[p+2*ch+1] = uint8(y>>8), uint8(y)
			}
		}
		dst.Pix[p+6], dst.Pix[p+7] = 0xff, 0xff
	}
	return dst
}

// decodedKinds are pictures of every type the PNG, JPEG and GIF decoders
// return, with random pixels (alpha included), at bounds from (0, 0) and
// not (GIF frames).
func decodedKinds(w, h int) map[string]image.Image {
	rng := rand.New(rand.NewPCG(3, 4))
	r := image.Rect(0, 0, w, h)
	fill := func(pix []byte) {
		for k := range pix {
			pix[k] = uint8(rng.IntN(256))
		}
	}
	out := map[string]image.Image{}
	rgba, nrgba, rgba64, nrgba64 := image.NewRGBA(r), image.NewNRGBA(r), image.NewRGBA64(r), image.NewNRGBA64(r)
	gray, gray16, cmyk, gray16b := image.NewGray(r), image.NewGray16(r), image.NewCMYK(r), image.NewGray16(image.Rect(1, 2, 1+w, 2+h))
	for _, pix := range [][]byte{nrgba.Pix, nrgba64.Pix, gray.Pix, gray16.Pix, cmyk.Pix, gray16b.Pix} {
		fill(pix)
	}
	// Premultiplied pictures hold colors at most their alpha.
	for p := 0; p < len(rgba.Pix); p += 4 {
		a := uint8(rng.IntN(256))
		rgba.Pix[p], rgba.Pix[p+1], rgba.Pix[p+2], rgba.Pix[p+3] = uint8(rng.IntN(int(a)+1)), uint8(rng.IntN(int(a)+1)), a, a
	}
	for x := range w {
		for y := range h {
			a := uint16(rng.IntN(1 << 16))
			rgba64.SetRGBA64(x, y, color.RGBA64{uint16(rng.IntN(int(a) + 1)), a / 2, a, a})
		}
	}
	opaque := image.NewRGBA64(r)
	draw.Draw(opaque, r, image.NewUniform(color.RGBA64{0x1234, 0xabcd, 0xffff, 0xffff}), image.Point{}, draw.Src)
	opaque.SetRGBA64(1, 0, color.RGBA64{0xff00, 0x00ff, 0x8080, 0xffff})
	pal := image.NewPaletted(image.Rect(2, 3, 2+w, 3+h), color.Palette{color.NRGBA{1, 2, 3, 255}, color.NRGBA{200, 100, 50, 128}, color.Gray{7}})
	for k := range pal.Pix {
		pal.Pix[k] = uint8(rng.IntN(3))
	}
	ycc := image.NewYCbCr(r, image.YCbCrSubsampleRatio420)
	fill(ycc.Y)
	fill(ycc.Cb)
	fill(ycc.Cr)
	out["RGBA"], out["NRGBA"], out["RGBA64"], out["opaque RGBA64"], out["NRGBA64"] = rgba, nrgba, rgba64, opaque, nrgba64
	out["Gray"], out["Gray16"], out["CMYK"], out["Paletted at (2, 3)"], out["YCbCr 4:2:0"] = gray, gray16, cmyk, pal, ycc
	out["Gray16 at (1, 2)"] = gray16b
	return out
}

// clonePicture copies a picture, so that an in-place conversion leaves the
// reference's input as it was.
func clonePicture(m image.Image) image.Image {
	switch s := m.(type) {
	case *image.RGBA:
		c := *s
		c.Pix = bytes.Clone(s.Pix)
		return &c
	case *image.NRGBA:
		c := *s
		c.Pix = bytes.Clone(s.Pix)
		return &c
	case *image.RGBA64:
		c := *s
		c.Pix = bytes.Clone(s.Pix)
		return &c
	case *image.NRGBA64:
		c := *s
		c.Pix = bytes.Clone(s.Pix)
		return &c
	case *image.CMYK:
		c := *s
		c.Pix = bytes.Clone(s.Pix)
		return &c
	}
	return m // converted into a new picture
}

func TestToRGBAInPlaceMatchesWhole(t *testing.T) {
	for name, m := range decodedKinds(7, 5) {
		for _, gray := range []bool{false, true} {
			want := toRGBAWhole(m, gray)
			got := toRGBA(clonePicture(m), gray)
			if got.Rect != want.Rect || got.Stride != want.Stride || !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("%s (gray %v): in place\n%v\nwhole\n%v", name, gray, got.Pix, want.Pix)
			}
		}
	}
}

// TestDeepRowsMatchWhole: toDeep in place and normalizeDecoded, row by
// row without a converted picture, give what the whole-picture conversion
// and normalizeDeep gave, for every kind of picture, 8- and 16-bit.
func TestDeepRowsMatchWhole(t *testing.T) {
	for name, m := range decodedKinds(7, 5) {
		for _, gray := range []bool{false, true} {
			want := toDeepWhole(m, gray)
			c := 3
			if gray {
				c = 1
			}
			wantOut, gotOut := make([]float32, c*7*5), make([]float32, c*7*5)
			normalizeDeep(want, c, wantOut)
			normalizeDecoded(m, gray, c, gotOut)
			for k := range wantOut {
				if math.Float32bits(wantOut[k]) != math.Float32bits(gotOut[k]) {
					t.Fatalf("%s (gray %v): value %d is %v, the whole conversion's %v", name, gray, k, gotOut[k], wantOut[k])
				}
			}
			got := toDeep(clonePicture(m), gray)
			var wantPix, gotPix []byte
			switch w := want.(type) {
			case *image.RGBA64:
				wantPix = w.Pix
				g, ok := got.(*image.RGBA64)
				if !ok {
					t.Fatalf("%s: toDeep gave %T, want *image.RGBA64", name, got)
				}
				gotPix = g.Pix
			case *image.RGBA:
				wantPix, gotPix = w.Pix, got.(*image.RGBA).Pix
			}
			if !bytes.Equal(gotPix, wantPix) {
				t.Errorf("%s (gray %v): toDeep differs from the whole conversion", name, gray)
			}
		}
	}
}

// TestMaskClassesInPlace: mapping a mask's values to classes over the
// decoder's own picture gives what mapping each value does, for 8- and
// 16-bit gray, palette and gray RGBA masks.
func TestMaskClassesInPlace(t *testing.T) {
	r := image.Rect(0, 0, 6, 4)
	gray, gray16, pal, rgba := image.NewGray(r), image.NewGray16(r), image.NewPaletted(image.Rect(1, 1, 7, 5), vocPalette()), image.NewRGBA(r)
	lut := make([]int16, MaxMaskValue+1)
	for v := range lut {
		lut[v] = int16(v % 3)
	}
	for p := range 24 {
		x, y := p%6, p/6
		gray.SetGray(x, y, color.Gray{uint8(p * 10)})
		gray16.SetGray16(x, y, color.Gray16{uint16(p * 2731)})
		pal.SetColorIndex(1+x, 1+y, uint8(p))
		rgba.SetRGBA(x, y, color.RGBA{uint8(p), uint8(p), uint8(p), 255})
	}
	for name, img := range map[string]image.Image{"gray": gray, "gray16": gray16, "palette at (1, 1)": pal, "gray RGBA": rgba} {
		m := maskPixels{name: name, img: img, w: 6, h: 4, bits: maskBits(img)}
		vals := m.values()
		got, err := m.classes(lut, "test")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for k, v := range vals {
			if got.Pix[k] != uint8(lut[v]) {
				t.Fatalf("%s: pixel %d is class %d, value %d is class %d", name, k, got.Pix[k], v, lut[v])
			}
		}
	}
	lut[30] = -1
	fresh := image.NewGray(r)
	fresh.Pix[3] = 30
	m := maskPixels{name: "m.png", img: fresh, w: 6, h: 4, bits: 8}
	if _, err := m.classes(lut, "test"); err == nil || err.Error() != "m.png: mask value 30 at x=3, y=0 is not a class (test)" {
		t.Errorf("a value that is no class: %v", err)
	}
}
