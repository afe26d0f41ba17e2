package data

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// WriteVolumeFolder writes a synthetic set of volumes (SyntheticConfig.Depth
// > 0) as data.source nifti reads it, one channel: DIR/images/vol_NNNN.nii.gz
// (int16, the mean of the sample's raw channels x 1000) and
// DIR/masks/vol_NNNN.nii.gz (uint8 classes), 1 mm isotropic voxels, x
// fastest, z the slices. DIR's images/ and masks/ are made; files of
// those names are replaced.
func WriteVolumeFolder(s *Synthetic, dir string) error {
	if s.cfg.Depth == 0 {
		return fmt.Errorf("data: WriteVolumeFolder needs synthetic volumes (data.size cubes with model.dims 3)")
	}
	for _, sub := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	n, d := s.cfg.Size, s.cfg.Depth
	voxels := d * n * n
	raw, mask := make([]float32, SyntheticChannels*voxels), make([]uint8, voxels)
	like := &Volume{Dims: [3]int{n, n, d}}
	for i := range s.Len() {
		s.generate(i, raw, mask, nil)
		gray := make([]int16, voxels)
		labels := make([]uint16, voxels)
		for v := range voxels {
			gray[v] = int16(math.Round(float64(raw[v]+raw[voxels+v]+raw[2*voxels+v]) / 3 * 1000))
			labels[v] = uint16(mask[v])
		}
		name := fmt.Sprintf("vol_%04d.nii.gz", i)
		if err := WriteInt16Volume(filepath.Join(dir, "images", name), like.Dims, gray); err != nil {
			return err
		}
		if err := WriteLabelVolume(filepath.Join(dir, "masks", name), like.Dims, labels); err != nil {
			return err
		}
	}
	return nil
}

// WriteInt16Volume writes vals (x fastest, then y, then z) as a
// gzip-compressed int16 NIfTI-1 volume of dims (x, y, z), 1 mm voxels.
func WriteInt16Volume(path string, dims [3]int, vals []int16) error {
	if len(vals) != dims[0]*dims[1]*dims[2] {
		return fmt.Errorf("data: %d values for a %s volume", len(vals), joinDims(dims[:]))
	}
	like := &Volume{Header: volumeHeader(dims), Order: binary.LittleEndian, Dims: dims}
	return writeGz(path, func(f *os.File) error { return writeInt16Volume(f, like, vals) })
}

// WriteLabelVolume writes labels (x fastest) as a gzip-compressed mask
// volume of dims, as WriteMaskVolume writes them, 1 mm voxels.
func WriteLabelVolume(path string, dims [3]int, labels []uint16) error {
	like := &Volume{Header: volumeHeader(dims), Order: binary.LittleEndian, Dims: dims}
	return writeGz(path, func(f *os.File) error { return WriteMaskVolume(f, like, labels, true) })
}

// writeGz creates path and writes it with write.
func writeGz(path string, write func(f *os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// volumeHeader is a little-endian NIfTI-1 header of dims (x, y, z) with 1
// mm voxels, no qform or sform (method 0), for WriteMaskVolume to fill in.
func volumeHeader(dims [3]int) (h [niftiHeaderSize]byte) {
	bo := binary.LittleEndian
	bo.PutUint32(h[0:], niftiHeaderSize)
	bo.PutUint16(h[niftiDim:], 3)
	for k := range 7 {
		size := 1
		if k < 3 {
			size = dims[k]
		}
		bo.PutUint16(h[niftiDim+2+2*k:], uint16(size))
	}
	for k := range 8 {
		bo.PutUint32(h[niftiPixdim+4*k:], math.Float32bits(1))
	}
	h[123] = 2 // xyzt_units: millimetres
	copy(h[niftiMagic:], "n+1\x00")
	return h
}

// writeInt16Volume writes vals as a gzip-compressed int16 volume with
// like's header geometry (the image twin of WriteMaskVolume).
func writeInt16Volume(f *os.File, like *Volume, vals []int16) error {
	lo, hi := int16(math.MaxInt16), int16(math.MinInt16)
	stored := make([]uint16, len(vals))
	for k, v := range vals {
		lo, hi, stored[k] = min(lo, v), max(hi, v), uint16(v)
	}
	h := storedHeader(like, niftiInt16, 2, float64(lo), float64(hi))
	return writeVolume(f, h, like.Order, 2, stored, true)
}
