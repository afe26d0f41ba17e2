package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/memunet/memunet/infile"
)

// NIfTI-1 (nifti1.h of the NIfTI Data Format Working Group): a 348-byte
// header, 4 extension bytes and the voxels at vox_offset, x fastest, then
// y, then z; gzip-compressed as a whole in a .nii.gz.

// niftiHeaderSize is sizeof_hdr of NIfTI-1 (540 for NIfTI-2).
const niftiHeaderSize = 348

// Offsets of the header fields memunet reads or writes.
const (
	niftiDim      = 40  // int16[8]: dim[0] the rank, dim[1..] the sizes
	niftiDatatype = 70  // int16
	niftiBitpix   = 72  // int16
	niftiPixdim   = 76  // float32[8]
	niftiVoxOff   = 108 // float32
	niftiSlope    = 112 // float32 scl_slope
	niftiInter    = 116 // float32 scl_inter
	niftiCalMax   = 124 // float32
	niftiCalMin   = 128 // float32
	niftiGlMax    = 140 // int32
	niftiGlMin    = 144 // int32
	niftiQform    = 252 // int16 qform_code, then sform_code, quatern_b..d, qoffset_x..z, srow_x..z
	niftiSrowEnd  = 328 // the end of srow_z
	niftiMagic    = 344 // "n+1\0" (one file) or "ni1\0" (.hdr + .img)
)

// NIfTI datatype codes memunet reads, with their bytes per voxel.
const (
	niftiUint8   = 2
	niftiInt16   = 4
	niftiInt32   = 8
	niftiFloat32 = 16
	niftiFloat64 = 64
	niftiInt8    = 256
	niftiUint16  = 512
	niftiUint32  = 768
)

var niftiTypes = map[int]struct {
	name  string
	bytes int
}{
	niftiUint8: {"uint8", 1}, niftiInt16: {"int16", 2}, niftiInt32: {"int32", 4}, niftiFloat32: {"float32", 4},
	niftiFloat64: {"float64", 8}, niftiInt8: {"int8", 1}, niftiUint16: {"uint16", 2}, niftiUint32: {"uint32", 4},
}

// volumeCopyBytes is what memunet makes of each voxel beside the stored
// ones, at most: data.source nifti's 16-bit intensity and class byte, or
// predict's 16-bit label.
const volumeCopyBytes = 3

// volumeBytes is what reading a volume of n voxels of size bytes each
// holds, with the copy made of it (volumeCopyBytes).
func volumeBytes(n int64, size int) int64 { return n * int64(size+volumeCopyBytes) }

// Volume is a NIfTI-1 volume: its header as stored (so a mask can be
// written with the same geometry) and its voxels.
type Volume struct {
	// Header is the 348 header bytes in the file's byte order.
	Header [niftiHeaderSize]byte
	Order  binary.ByteOrder
	// Dims are the sizes along x, y and z (1 for a 2D image's z).
	Dims [3]int
	// Datatype is the NIfTI datatype code of the voxels.
	Datatype int
	// Slope and Inter scale a stored value s to s*Slope + Inter (Slope 0:
	// no scaling), as scl_slope and scl_inter say.
	Slope, Inter float64
	// Voxels are the stored voxel bytes, x fastest.
	Voxels []byte
	// Gzip says the file was gzip-compressed (.nii.gz).
	Gzip bool
}

// Len is the number of voxels.
func (v *Volume) Len() int { return v.Dims[0] * v.Dims[1] * v.Dims[2] }

// At is voxel k's value, scaled by Slope and Inter.
func (v *Volume) At(k int) float64 {
	s := v.stored(k)
	if v.Slope != 0 && !(v.Slope == 1 && v.Inter == 0) {
		return s*v.Slope + v.Inter
	}
	return s
}

// stored is voxel k's stored value.
func (v *Volume) stored(k int) float64 {
	b := v.Voxels
	switch v.Datatype {
	case niftiUint8:
		return float64(b[k])
	case niftiInt8:
		return float64(int8(b[k]))
	case niftiInt16:
		return float64(int16(v.Order.Uint16(b[2*k:])))
	case niftiUint16:
		return float64(v.Order.Uint16(b[2*k:]))
	case niftiInt32:
		return float64(int32(v.Order.Uint32(b[4*k:])))
	case niftiUint32:
		return float64(v.Order.Uint32(b[4*k:]))
	case niftiFloat32:
		return float64(math.Float32frombits(v.Order.Uint32(b[4*k:])))
	case niftiFloat64:
		return math.Float64frombits(v.Order.Uint64(b[8*k:]))
	}
	return 0
}

// TypeName is the voxel type's name, e.g. "int16".
func (v *Volume) TypeName() string { return niftiTypes[v.Datatype].name }

// Format names the file for people: "NIfTI-1 int16 64x64x20 (.nii.gz)".
func (v *Volume) Format() string {
	ext := ".nii"
	if v.Gzip {
		ext = ".nii.gz"
	}
	return fmt.Sprintf("NIfTI-1 %s %dx%dx%d (%s)", v.TypeName(), v.Dims[0], v.Dims[1], v.Dims[2], ext)
}

// IsNIfTIName reports whether a file name ends in .nii or .nii.gz
// (case-insensitive).
func IsNIfTIName(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".nii") || strings.HasSuffix(n, ".nii.gz")
}

// niftiStem is a file name without .nii or .nii.gz.
func niftiStem(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".nii.gz"):
		return name[:len(name)-len(".nii.gz")]
	case strings.HasSuffix(n, ".nii"):
		return name[:len(name)-len(".nii")]
	}
	return name
}

// maxNIfTIFileBytes bounds a NIfTI file on disk (compressed or not).
const maxNIfTIFileBytes = 4 << 30

// ReadVolume reads a NIfTI-1 file (.nii or .nii.gz, told by its first
// bytes) whose voxels, with the copy made of them, take at most maxBytes
// (0: MaxDecodeBytes), checked from its header before they are read.
// Every error starts with the path and says what to do.
func ReadVolume(path string, maxBytes int64) (*Volume, error) {
	if maxBytes <= 0 {
		maxBytes = MaxDecodeBytes
	}
	f, size, err := openNIfTIFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := readVolume(bufio.NewReader(f), maxBytes, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return v, nil
}

// openNIfTIFile opens a NIfTI file for reading, with its size: what is not
// a regular file, or is larger than any NIfTI file memunet reads, is
// refused unread (infile's words), another failure names the path.
func openNIfTIFile(path string) (*os.File, int64, error) {
	f, size, err := infile.Open(path, maxNIfTIFileBytes)
	if err != nil {
		var ie *infile.Error
		if errors.As(err, &ie) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("%s: cannot read: %v", path, unwrapPath(err))
	}
	return f, size, nil
}

// readVolume is ReadVolume on a stream of size bytes (0: unknown); the
// error says what is wrong in words (the caller names the file).
func readVolume(r *bufio.Reader, maxBytes, size int64) (*Volume, error) {
	v := &Volume{}
	in, z, err := v.readHeader(r)
	if z != nil {
		defer z.Close()
	}
	if err != nil {
		return nil, err
	}
	t := niftiTypes[v.Datatype]
	// Bytes, not voxels: a 645^3 float64 volume is 2 GiB stored, four
	// times a uint16 one of as many voxels.
	nvox := int64(v.Dims[0]) * int64(v.Dims[1]) * int64(v.Dims[2])
	if need := volumeBytes(nvox, t.bytes); need > maxBytes {
		return nil, fmt.Errorf("is a %s volume of %s voxels: %s as stored and %d more for the copy memunet makes (%d bytes a voxel), %s in all, more than the %s memunet decodes of one file; crop or resample the volume, or save it with smaller voxels (e.g. float32 or int16)",
			t.name, joinDims(v.Dims[:]), byteSize(nvox*int64(t.bytes)), nvox*volumeCopyBytes, volumeCopyBytes, byteSize(need), byteSize(maxBytes))
	}
	if err := v.skipToVoxels(in, size); err != nil {
		return nil, err
	}
	v.Voxels = make([]byte, nvox*int64(t.bytes))
	if _, err := io.ReadFull(in, v.Voxels); err != nil {
		return nil, truncated(err, fmt.Sprintf("before its %s voxels (%d bytes) end", joinDims(v.Dims[:]), len(v.Voxels)))
	}
	if v.Gzip {
		// Read on to the end of the stream, so gzip checks its length and
		// checksum: a cut or damaged file is not taken for a whole one.
		if _, err := io.CopyN(io.Discard, in, 1<<20); err != nil && err != io.EOF {
			return nil, truncated(err, "inside its gzip trailer")
		}
	}
	return v, nil
}

// parseHeader reads v.Header into v's Order, Dims, Datatype, Slope and
// Inter, refusing what memunet does not read; the error says what is
// wrong in words.
func (v *Volume) parseHeader() error {
	h := v.Header[:]
	switch {
	case binary.LittleEndian.Uint32(h) == niftiHeaderSize:
		v.Order = binary.LittleEndian
	case binary.BigEndian.Uint32(h) == niftiHeaderSize:
		v.Order = binary.BigEndian
	case binary.LittleEndian.Uint32(h) == 540 || binary.BigEndian.Uint32(h) == 540:
		return fmt.Errorf("is a NIfTI-2 file, which memunet does not read; save it as NIfTI-1 (e.g. nibabel's Nifti1Image)")
	default:
		return fmt.Errorf("is not a NIfTI-1 file (its first 4 bytes are not the header size 348); volumes must be .nii or .nii.gz")
	}
	bo := v.Order
	switch magic := string(h[niftiMagic : niftiMagic+4]); magic {
	case "n+1\x00":
	case "ni1\x00":
		return fmt.Errorf("is the header of a .hdr/.img pair, which memunet does not read; save the volume as one .nii or .nii.gz file")
	default:
		return fmt.Errorf("has the NIfTI magic %q, not \"n+1\"; the file is corrupt or not NIfTI-1", strings.TrimRight(magic, "\x00"))
	}
	rank := int(int16(bo.Uint16(h[niftiDim:])))
	dims := [7]int{}
	for k := range dims {
		dims[k] = int(int16(bo.Uint16(h[niftiDim+2+2*k:])))
	}
	if rank < 2 || rank > 7 {
		return fmt.Errorf("has dim[0] = %d; a volume has 2 or 3 dimensions", rank)
	}
	for k := range rank {
		if dims[k] < 1 {
			return fmt.Errorf("has a size of %d along dimension %d; sizes must be at least 1", dims[k], k+1)
		}
	}
	for k := 3; k < rank; k++ {
		if dims[k] != 1 {
			return fmt.Errorf("is a %dD image (%s); memunet reads 3D volumes: save each volume of a series (each time point or channel) as its own file",
				rank, joinDims(dims[:rank]))
		}
	}
	v.Dims = [3]int{dims[0], dims[1], 1}
	if rank >= 3 {
		v.Dims[2] = dims[2]
	}
	v.Datatype = int(int16(bo.Uint16(h[niftiDatatype:])))
	t, ok := niftiTypes[v.Datatype]
	if !ok {
		return fmt.Errorf("has voxels of NIfTI datatype %d, which memunet does not read; save it as uint8, int8, int16, uint16, int32, uint32, float32 or float64", v.Datatype)
	}
	if bp := int(int16(bo.Uint16(h[niftiBitpix:]))); bp != 8*t.bytes {
		return fmt.Errorf("says bitpix %d for %s voxels (%d bits); the header is corrupt", bp, t.name, 8*t.bytes)
	}
	v.Slope = float64(math.Float32frombits(bo.Uint32(h[niftiSlope:])))
	v.Inter = float64(math.Float32frombits(bo.Uint32(h[niftiInter:])))
	if math.IsNaN(v.Slope) || math.IsInf(v.Slope, 0) || math.IsNaN(v.Inter) || math.IsInf(v.Inter, 0) {
		v.Slope, v.Inter = 0, 0 // nifti1.h: not finite means no scaling
	}
	return nil
}

// voxOffset is where the voxels start in the file (vox_offset), checked.
func (v *Volume) voxOffset() (int64, error) {
	off := float64(math.Float32frombits(v.Order.Uint32(v.Header[niftiVoxOff:])))
	if !(off >= niftiHeaderSize && off <= 1<<24) || off != math.Trunc(off) {
		return 0, fmt.Errorf("has vox_offset %g; it must be a whole number of bytes from 348 (352 for a file without extensions)", off)
	}
	return int64(off), nil
}

// readHeader reads and parses v's header from r, through gzip where r
// starts with its magic: the reader the voxels follow in, and the gzip
// reader (nil uncompressed) for the caller to close, even with an error.
func (v *Volume) readHeader(r *bufio.Reader) (in io.Reader, z *gzip.Reader, err error) {
	in = r
	if sig, _ := r.Peek(2); len(sig) == 2 && sig[0] == 0x1f && sig[1] == 0x8b {
		if z, err = gzip.NewReader(r); err != nil {
			return nil, nil, fmt.Errorf("the gzip stream is corrupt (%v); re-export the volume", err)
		}
		in, v.Gzip = z, true
	}
	if _, err := io.ReadFull(in, v.Header[:]); err != nil {
		return in, z, truncated(err, "inside the 348-byte NIfTI header")
	}
	return in, z, v.parseHeader()
}

// skipToVoxels reads in, a file of size bytes (0: unknown) past the
// header, up to the voxels (the extension flag and any extensions), once
// the file is known to hold them (fitsFile).
func (v *Volume) skipToVoxels(in io.Reader, size int64) error {
	off, err := v.voxOffset()
	if err != nil {
		return err
	}
	if err := v.fitsFile(off, size); err != nil {
		return err
	}
	if _, err := io.CopyN(io.Discard, in, off-niftiHeaderSize); err != nil {
		return truncated(err, "before its voxels start")
	}
	return nil
}

// fitsFile refuses an uncompressed file of size bytes (0: unknown) that
// ends before the voxels its header places from byte off: known before
// any memory is taken for them.
func (v *Volume) fitsFile(off, size int64) error {
	stored := int64(v.Dims[0]) * int64(v.Dims[1]) * int64(v.Dims[2]) * int64(niftiTypes[v.Datatype].bytes)
	if v.Gzip || size <= 0 || off+stored <= size {
		return nil
	}
	return fmt.Errorf("the NIfTI file is truncated (its header puts %s voxels, %d bytes, after byte %d, and the file has %d bytes); re-export or re-download it",
		joinDims(v.Dims[:]), stored, off, size)
}

// truncated words a read error of a NIfTI file.
func truncated(err error, where string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the NIfTI file is truncated (it ends %s); re-export or re-download it", where)
	}
	return fmt.Errorf("cannot read the NIfTI data (%v); the file is corrupt", err)
}

func joinDims(d []int) string {
	parts := make([]string, len(d))
	for k, v := range d {
		parts[k] = fmt.Sprint(v)
	}
	return strings.Join(parts, "x")
}

// WriteMaskVolume writes labels (one per voxel of like, x fastest) as a
// NIfTI-1 volume with like's header geometry: every header byte is like's
// (dims, pixdim, qform and sform, units, description) except the voxel type
// (uint8, or uint16 when a label exceeds 255), no scaling, cal_min/max and
// glmin/max spanning the labels, and vox_offset 352 (extensions are not
// copied). gz compresses the file (.nii.gz).
func WriteMaskVolume(w io.Writer, like *Volume, labels []uint16, gz bool) error {
	if len(labels) != like.Len() {
		return fmt.Errorf("data: %d labels for a %s volume", len(labels), joinDims(like.Dims[:]))
	}
	bo := like.Order
	hi := uint16(0)
	for _, l := range labels {
		hi = max(hi, l)
	}
	h, size := maskHeader(like, hi)
	return writeVolume(w, h, bo, size, labels, gz)
}

// writeVolume writes header h and the voxels (each stored in size bytes,
// 1 or 2, in byte order bo), gzip-compressed where gz says.
func writeVolume(w io.Writer, h [niftiHeaderSize]byte, bo binary.ByteOrder, size int, labels []uint16, gz bool) error {
	var out io.Writer = w
	var z *gzip.Writer
	if gz {
		z = gzip.NewWriter(w)
		out = z
	}
	bw := bufio.NewWriter(out)
	bw.Write(h[:])
	bw.Write([]byte{0, 0, 0, 0}) // no extensions
	var b [2]byte
	for _, l := range labels {
		if size == 1 {
			bw.WriteByte(byte(l))
		} else {
			bo.PutUint16(b[:], l)
			bw.Write(b[:])
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if z != nil {
		return z.Close()
	}
	return nil
}

// maskHeader is like's header for a mask of labels up to hi, as
// WriteMaskVolume writes it, and the bytes of a label (1 or 2).
func maskHeader(like *Volume, hi uint16) (h [niftiHeaderSize]byte, size int) {
	typ, size := niftiUint8, 1
	if hi > 255 {
		typ, size = niftiUint16, 2
	}
	h = storedHeader(like, typ, size, 0, float64(hi))
	like.Order.PutUint32(h[niftiGlMax:], uint32(hi))
	like.Order.PutUint32(h[niftiGlMin:], 0)
	return h, size
}

// storedHeader is like's header for voxels written as datatype typ of
// size bytes, unscaled, from vox_offset 352, cal_min/max lo and hi.
func storedHeader(like *Volume, typ, size int, lo, hi float64) [niftiHeaderSize]byte {
	h, bo := like.Header, like.Order
	bo.PutUint16(h[niftiDatatype:], uint16(typ))
	bo.PutUint16(h[niftiBitpix:], uint16(8*size))
	bo.PutUint32(h[niftiVoxOff:], math.Float32bits(352))
	bo.PutUint32(h[niftiSlope:], math.Float32bits(1))
	bo.PutUint32(h[niftiInter:], math.Float32bits(0))
	bo.PutUint32(h[niftiCalMax:], math.Float32bits(float32(hi)))
	bo.PutUint32(h[niftiCalMin:], math.Float32bits(float32(lo)))
	return h
}

// Spacing is the voxel size along x, y and z (pixdim[1..3], their
// absolute values) and its unit as xyzt_units says: "m", "mm", "um", or
// "" when the header gives none.
func (v *Volume) Spacing() (size [3]float64, unit string) {
	for k := range size {
		size[k] = math.Abs(float64(math.Float32frombits(v.Order.Uint32(v.Header[niftiPixdim+4*(k+1):]))))
	}
	return size, map[byte]string{1: "m", 2: "mm", 3: "um"}[v.Header[123]&0x07]
}

// Geometry is the header bytes that place a volume in space: dim, pixdim,
// xyzt_units, qform and sform; two volumes with equal Geometry overlay.
func (v *Volume) Geometry() []byte {
	h := v.Header[:]
	return bytes.Join([][]byte{h[niftiDim : niftiDim+16], h[niftiPixdim : niftiPixdim+32], h[123:124], h[niftiQform:niftiSrowEnd]}, nil)
}

// sliceAxes are the two axes of a slice across axis: the plane's columns
// (the lower axis, varying fastest) and rows.
func sliceAxes(axis int) (cols, rows int) {
	switch axis {
	case 0:
		return 1, 2
	case 1:
		return 0, 2
	}
	return 0, 1
}

// SliceSize is the height and width of a slice across axis: rows along
// the higher of the two other axes, columns along the lower.
func (v *Volume) SliceSize(axis int) (h, w int) {
	c, r := sliceAxes(axis)
	return v.Dims[r], v.Dims[c]
}

// Slices is the number of slices across axis.
func (v *Volume) Slices(axis int) int { return v.Dims[axis] }

// VoxelIndex is the index in the volume of pixel (y, x) of slice k across
// axis.
func (v *Volume) VoxelIndex(axis, k, y, x int) int {
	var p [3]int
	c, r := sliceAxes(axis)
	p[axis], p[r], p[c] = k, y, x
	return p[0] + v.Dims[0]*(p[1]+v.Dims[1]*p[2])
}
