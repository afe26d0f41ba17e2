package data

import (
	"bytes"
	"image"
	"image/color"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestNIfTIDecodeBudget: a volume's budget counts bytes of its stored type
// and the copy made of it (3 a voxel), not voxels. A 300-byte .nii.gz whose
// header declares 645^3 float64 voxels (2 GiB stored, 2.75 GiB in all; it
// took 5.4 GB RSS when the cap counted voxels) is refused from its header,
// fast and without allocating them; a small float64 volume loads, and the
// budget's edge is exact.
func TestNIfTIDecodeBudget(t *testing.T) {
	vals := make([]float64, 24)
	for k := range vals {
		vals[k] = float64(k)*0.5 - 3
	}
	small := niftiFile([]int{4, 3, 2}, niftiFloat64, vals, true)
	huge := niftiFile([]int{645, 645, 645}, niftiFloat64, nil, true) // the header alone
	for _, tc := range []struct {
		name string
		b    []byte
		max  int64    // ReadVolume's budget (0: MaxDecodeBytes)
		want []string // in the error; nil: it loads
	}{
		{"645^3 float64", huge, 0, []string{"float64 volume of 645x645x645 voxels", "2146689000 bytes (2.00 GiB) as stored",
			"805008375 more for the copy memunet makes (3 bytes a voxel)", "2951697375 bytes (2.75 GiB) in all", "more than the 2147483648 bytes (2.00 GiB)", "float32 or int16"}},
		{"small float64", small, 0, nil},
		{"at the budget", small, 24 * (8 + 3), nil},
		{"a byte over", small, 24*(8+3) - 1, []string{"float64 volume of 4x3x2 voxels: 192 bytes as stored", "264 bytes in all, more than the 263 bytes"}},
		{"int16 where float64 is over", niftiFile([]int{4, 3, 2}, niftiInt16, vals[:24], false), 24*(8+3) - 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v.nii.gz")
			writeFile(t, path, tc.b)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			v, err := ReadVolume(path, tc.max)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				for k := range v.Len() {
					if got := v.At(k); v.Datatype == niftiFloat64 && got != vals[k] {
						t.Fatalf("voxel %d is %g, want %g", k, got, vals[k])
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("read a %s volume, want it refused", joinDims(v.Dims[:]))
			}
			for _, w := range append(tc.want, path+": ") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("refused in %v, %d bytes allocated: %v", took, alloc, err)
			if alloc > 1<<20 || took > 2*time.Second {
				t.Errorf("refusing took %v and allocated %d bytes; want it from the header, under 1 MiB", took, alloc)
			}
		})
	}
}

// jpegHeader is a JPEG's start up to its scan: a frame of h x w pixels
// of n components (1 gray, 3 YCbCr, 4 CMYK), baseline or progressive; no
// pixel data, as a hostile header would come.
func jpegHeader(h, w, n int, progressive bool) []byte {
	sof := byte(0xc0)
	if progressive {
		sof = 0xc2
	}
	b := []byte{0xff, 0xd8, 0xff, sof, 0, byte(8 + 3*n), 8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(n)}
	for c := range n {
		b = append(b, byte(c+1), 0x11, 0)
	}
	return append(b, 0xff, 0xda, 0, 8, 1, 1, 0, 0, 63, 0, 0xff, 0xd9)
}

// TestImageDecodeBudget: an image's budget counts what decoding it holds
// in bytes: a progressive JPEG keeps 4 bytes a sample of coefficients
// beside its planes, so 11000x11000 (121 Mpx, under MaxImagePixels) takes
// 19 bytes a pixel, 2.14 GiB, and is refused from its header, where the
// baseline one (7 a pixel) is not; small pictures of every kind load.
func TestImageDecodeBudget(t *testing.T) {
	g := image.NewGray16(image.Rect(0, 0, 24, 16))
	for k := range g.Pix {
		g.Pix[k] = uint8(k)
	}
	rgba := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	for k := range rgba.Pix {
		rgba.Pix[k] = uint8(3 * k)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		cost int64    // bytes a pixel
		want []string // in the error; nil: accepted
	}{
		{"progressive YCbCr 11000^2", jpegHeader(11000, 11000, 3, true), 19,
			[]string{"progressive JPEG (YCbCr) of 11000x11000 (height x width) pixels takes 2299000000 bytes (2.14 GiB) to decode, 19 a pixel", "more than the 2147483648 bytes (2.00 GiB)", "baseline JPEG or a PNG"}},
		{"progressive CMYK 10000^2", jpegHeader(10000, 10000, 4, true), 24, []string{"progressive JPEG (CMYK)", "2400000000 bytes"}},
		{"baseline YCbCr 11000^2", jpegHeader(11000, 11000, 3, false), 7, nil},
		{"progressive gray 11000^2", jpegHeader(11000, 11000, 1, true), 9, nil},
		{"16-bit gray PNG", encodePNG(t, g), 10, nil},
		{"RGBA PNG", encodePNG(t, rgba), 4, nil},
		{"palette GIF", encodeGIF(t, image.NewPaletted(image.Rect(0, 0, 16, 16), color.Palette{color.Black, color.White})), 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, err := readImageHeader("x.img", bytes.NewReader(tc.b), int64(len(tc.b)), MaxImagePixels)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := im.imageCost() / im.pixels(); got != tc.cost {
					t.Errorf("costs %d bytes a pixel, want %d", got, tc.cost)
				}
				if im.pixels() <= 1<<10 {
					if _, err := im.decodeImage(3); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			if err == nil {
				t.Fatal("accepted; want it refused from its header")
			}
			for _, w := range append(tc.want, "x.img: ") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
