package data

import (
	"bytes"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestVolumeStream: a volume read slice by slice along z is ReadVolume's
// volume: its header and geometry, each slice's voxels and values (every
// fixture: each voxel type, both byte orders, gzip or not, scaled, an
// extension before the voxels), its intensity (StreamIntensity against
// Volume.Intensity, window and zscore) and its slices windowed to 16 bits as
// SlicePicture windows them.
func TestVolumeStream(t *testing.T) {
	for _, name := range []string{"uint8.nii", "int16.nii.gz", "uint16_be.nii", "int32.nii.gz", "float32_ext.nii.gz", "int16_scaled.nii", "label.nii.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "nifti", name)
			v, err := ReadVolume(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			s, err := OpenVolumeStream(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Volume.Header != v.Header || s.Volume.Dims != v.Dims || s.Volume.Gzip != v.Gzip || s.Volume.Order != v.Order || s.Volume.Voxels != nil {
				t.Fatalf("the stream's header differs from ReadVolume's")
			}
			for _, nc := range []NIfTIConfig{{}, {Window: []float64{-3, 9}}, {Normalize: NormalizeZScore}, {Window: []float64{-3, 9}, Normalize: NormalizeZScore}} {
				want, _ := v.Intensity(nc)
				got, err := StreamIntensity(path, nc)
				if err != nil || got.Lo != want.Lo || got.Hi != want.Hi || got.ZScore != want.ZScore ||
					(want.ZScore && (math.Abs(got.VolMean-want.VolMean) > 1e-9*(1+math.Abs(want.VolMean)) || math.Abs(got.VolStd-want.VolStd) > 1e-9*(1+want.VolStd))) {
					t.Fatalf("%+v: stream %+v (%v), want %+v", nc, got, err, want)
				}
			}
			if in, _ := StreamIntensity(path, NIfTIConfig{Window: []float64{-3, 9}}); in.Lo != -3 || in.Hi != 9 {
				t.Errorf("a given window: %+v", in)
			}
			lo, hi := v.IntensityWindow(nil)
			n := v.Dims[0] * v.Dims[1]
			q := make([]uint16, n)
			for z := range v.Dims[2] {
				k, err := s.Next()
				if err != nil || k != z {
					t.Fatalf("slice %d: %d, %v", z, k, err)
				}
				if s.Slice.Dims != [3]int{v.Dims[0], v.Dims[1], 1} || s.SliceBytes() != int64(len(v.Voxels)/v.Dims[2]) {
					t.Fatalf("slice dims %v, %d bytes", s.Slice.Dims, s.SliceBytes())
				}
				for i := range n {
					if got, want := s.Slice.At(i), v.At(z*n+i); got != want {
						t.Fatalf("slice %d voxel %d = %g, want %g", z, i, got, want)
					}
				}
				s.Slice.Windowed16(lo, hi, q)
				pic := v.SlicePicture(2, z, lo, hi)
				for i := range n {
					r, _, _, _ := pic.At(i%v.Dims[0], i/v.Dims[0]).RGBA()
					if uint32(q[i]) != r {
						t.Fatalf("slice %d voxel %d windowed to %d, SlicePicture %d", z, i, q[i], r)
					}
				}
			}
			if _, err := s.Next(); err != io.EOF {
				t.Errorf("past the last slice: %v", err)
			}
		})
	}
}

// TestVolumeStreamTruncated: a cut file is an error naming the file and
// where it ends, never a volume: an uncompressed one when it is opened
// (its size is short of what the header says), a compressed one in its
// last slice or its gzip trailer.
func TestVolumeStreamTruncated(t *testing.T) {
	vals := make([]float64, 4*3*5)
	for k := range vals {
		vals[k] = float64(k)
	}
	for _, gz := range []bool{false, true} {
		whole := niftiFile([]int{4, 3, 5}, niftiInt16, vals, gz)
		cut := whole[:len(whole)-6]
		path := filepath.Join(t.TempDir(), "cut.nii")
		writeFile(t, path, cut)
		s, err := OpenVolumeStream(path)
		if err == nil {
			for err == nil {
				_, err = s.Next()
			}
			s.Close()
		} else if gz || !strings.Contains(err.Error(), "its header puts 4x3x5 voxels, 120 bytes, after byte 352, and the file has 466 bytes") {
			t.Errorf("gzip %v: refused when opened: %v", gz, err)
		}
		if err == io.EOF || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("gzip %v: %v", gz, err)
		}
	}
}

// TestMaskVolumeWriter: a mask written slice by slice is the file
// WriteMaskVolume writes of the same labels (gzip or not, 8 or 16 bits a
// label), where hi is the largest label.
func TestMaskVolumeWriter(t *testing.T) {
	for _, src := range []string{"int16.nii.gz", "uint16_be.nii"} {
		like, err := ReadVolume(filepath.Join("testdata", "nifti", src), 0)
		if err != nil {
			t.Fatal(err)
		}
		n := like.Dims[0] * like.Dims[1]
		for _, top := range []uint16{3, 300} {
			labels := make([]uint16, like.Len())
			hi := uint16(0)
			for k := range labels {
				labels[k] = uint16(k*7) % (top + 1)
				hi = max(hi, labels[k])
			}
			if (hi > 255) != (top > 255) {
				t.Fatalf("labels up to %d for a top of %d", hi, top)
			}
			for _, gz := range []bool{true, false} {
				var want, got bytes.Buffer
				if err := WriteMaskVolume(&want, like, labels, gz); err != nil {
					t.Fatal(err)
				}
				w, err := NewMaskVolumeWriter(&got, like, hi, gz)
				if err != nil {
					t.Fatal(err)
				}
				for z := range like.Dims[2] {
					if err := w.WriteSlice(labels[z*n : (z+1)*n]); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.WriteSlice(labels[:n]); err == nil {
					t.Error("a slice past the volume was written")
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Errorf("%s top %d gz %v: the streamed file differs from WriteMaskVolume's", src, top, gz)
				}
			}
		}
		w, err := NewMaskVolumeWriter(io.Discard, like, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteSlice(make([]uint16, n-1)); err == nil {
			t.Error("a short slice was written")
		}
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), "0 slices written") {
			t.Errorf("closing a volume without its slices: %v", err)
		}
	}
}
