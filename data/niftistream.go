package data

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
)

// Streaming NIfTI-1: a volume read one z-slice at a time (z is the last
// axis, the slowest in the file) and a mask volume written one z-slice at
// a time, so that what is held is a slice, never the volume. The header
// is ReadVolume's (parseHeader), and the mask's WriteMaskVolume's
// (maskHeader).

// streamReadBuffer is a VolumeStream's read buffer.
const streamReadBuffer = 64 << 10

// VolumeStreamBytes is what a VolumeStream holds beside its slice's
// stored voxels: the read buffer and, for a .nii.gz, the gzip reader (its
// 32 KiB window and Huffman tables), rounded up.
const VolumeStreamBytes = streamReadBuffer + 64<<10

// MaskWriterBytes is what a MaskVolumeWriter holds beside a slice's
// encoded labels: its write buffer and, gzipped, the compressor (hash
// chains and window, about 800 KiB at the default level), rounded up.
const MaskWriterBytes = streamWriteBuffer + 1<<20

// streamWriteBuffer is a MaskVolumeWriter's write buffer.
const streamWriteBuffer = 64 << 10

// VolumeStream reads a NIfTI-1 file (.nii or .nii.gz, told by its first
// bytes) slice by slice along z. Its errors start with the path, as
// ReadVolume's do.
type VolumeStream struct {
	// Volume is the file's header: its geometry, voxel type and scaling,
	// and no voxels.
	Volume *Volume
	// Slice is the z-slice read last (Next): a volume of Dims [x, y, 1]
	// with Volume's header, type and scaling, whose At(k) is voxel k of
	// the slice (x fastest).
	Slice *Volume
	// Path is the file's path.
	Path string
	f    *os.File
	z    *gzip.Reader
	in   io.Reader
	next int // the slice Next reads
}

// OpenVolumeStream opens path and reads its header; Next reads its
// slices. The caller closes it.
func OpenVolumeStream(path string) (*VolumeStream, error) {
	f, size, err := openNIfTIFile(path)
	if err != nil {
		return nil, err
	}
	s := &VolumeStream{Path: path, f: f, Volume: &Volume{}}
	if err := s.open(bufio.NewReaderSize(f, streamReadBuffer), size); err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// open reads the header from r (a file of size bytes, 0: unknown), up
// to the voxels.
func (s *VolumeStream) open(r *bufio.Reader, size int64) error {
	v := s.Volume
	var err error
	if s.in, s.z, err = v.readHeader(r); err != nil {
		return err
	}
	if err := v.skipToVoxels(s.in, size); err != nil {
		return err
	}
	slice := *v
	slice.Dims[2] = 1
	slice.Voxels = make([]byte, v.Dims[0]*v.Dims[1]*niftiTypes[v.Datatype].bytes)
	s.Slice = &slice
	return nil
}

// SliceBytes is the stored bytes of one slice, what Slice holds.
func (s *VolumeStream) SliceBytes() int64 { return int64(len(s.Slice.Voxels)) }

// Next reads the next z-slice into Slice and returns its index; after
// the last it returns io.EOF. Reading the last slice of a .nii.gz reads
// on to the end of the gzip stream, so that a cut or damaged file is not
// taken for a whole one.
func (s *VolumeStream) Next() (int, error) {
	if s.next >= s.Volume.Dims[2] {
		return 0, io.EOF
	}
	if _, err := io.ReadFull(s.in, s.Slice.Voxels); err != nil {
		return 0, fmt.Errorf("%s: %v", s.Path, truncated(err, fmt.Sprintf("before its %s voxels end (in slice %d)", joinDims(s.Volume.Dims[:]), s.next)))
	}
	k := s.next
	s.next++
	if s.next == s.Volume.Dims[2] && s.z != nil {
		if _, err := io.CopyN(io.Discard, s.in, 1<<20); err != nil && err != io.EOF {
			return 0, fmt.Errorf("%s: %v", s.Path, truncated(err, "inside its gzip trailer"))
		}
	}
	return k, nil
}

// Close closes the file.
func (s *VolumeStream) Close() error {
	if s.z != nil {
		s.z.Close()
	}
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// StreamIntensity is Volume.Intensity of the volume at path without
// holding it: read through once, slice by slice, where the window's
// bounds or the z-score's statistics need its voxels.
func StreamIntensity(path string, nc NIfTIConfig) (Intensity, error) {
	if len(nc.Window) == 2 && nc.Normalize != NormalizeZScore {
		return Intensity{Lo: nc.Window[0], Hi: nc.Window[1]}, nil
	}
	s, err := OpenVolumeStream(path)
	if err != nil {
		return Intensity{}, err
	}
	defer s.Close()
	st := newIntensityStats(nc.Window)
	for {
		if _, err := s.Next(); err == io.EOF {
			in := st.intensity(nc)
			if err := st.check(in); err != nil {
				return in, fmt.Errorf("%s: %v", path, err)
			}
			return in, nil
		} else if err != nil {
			return Intensity{}, err
		}
		for k := range s.Slice.Len() {
			st.add(s.Slice.At(k))
		}
	}
}

// Windowed16 writes v's voxels windowed by [lo, hi] to 16 bits into dst
// (one per voxel), as SlicePicture and data.source nifti window them.
func (v *Volume) Windowed16(lo, hi float64, dst []uint16) {
	q := quantizer(lo, hi)
	for k := range dst {
		dst[k] = q(v.At(k))
	}
}

// MaskVolumeWriter writes a mask volume slice by slice along z: the
// header WriteMaskVolume writes for like (every geometry byte like's),
// then each slice's labels as they come.
type MaskVolumeWriter struct {
	like   *Volume
	size   int // bytes a label
	slices int // written so far
	z      *gzip.Writer
	bw     *bufio.Writer
	row    []byte // one slice encoded
}

// NewMaskVolumeWriter writes the header of a mask volume like like for
// labels up to hi (uint8, or uint16 above 255; cal_max and glmax say hi:
// the largest label a slice may hold, not one found, since the header
// comes first), gzip-compressed where gz says.
func NewMaskVolumeWriter(w io.Writer, like *Volume, hi uint16, gz bool) (*MaskVolumeWriter, error) {
	h, size := maskHeader(like, hi)
	m := &MaskVolumeWriter{like: like, size: size, row: make([]byte, like.Dims[0]*like.Dims[1]*size)}
	var out io.Writer = w
	if gz {
		m.z = gzip.NewWriter(w)
		out = m.z
	}
	m.bw = bufio.NewWriterSize(out, streamWriteBuffer)
	m.bw.Write(h[:])
	if _, err := m.bw.Write([]byte{0, 0, 0, 0}); err != nil { // no extensions
		return nil, err
	}
	return m, nil
}

// SliceBytes is the encoded bytes of one slice, what the writer holds.
func (m *MaskVolumeWriter) SliceBytes() int64 { return int64(len(m.row)) }

// WriteSlice writes the next z-slice's labels (x fastest), each at most
// the hi the writer was made for.
func (m *MaskVolumeWriter) WriteSlice(labels []uint16) error {
	if len(labels)*m.size != len(m.row) {
		return fmt.Errorf("data: %d labels for a slice of %dx%d", len(labels), m.like.Dims[0], m.like.Dims[1])
	}
	if m.slices >= m.like.Dims[2] {
		return fmt.Errorf("data: slice %d of a volume of %d", m.slices, m.like.Dims[2])
	}
	if m.size == 1 {
		for k, l := range labels {
			m.row[k] = byte(l)
		}
	} else {
		for k, l := range labels {
			m.like.Order.PutUint16(m.row[2*k:], l)
		}
	}
	m.slices++
	_, err := m.bw.Write(m.row)
	return err
}

// Close flushes the volume, once every slice is written.
func (m *MaskVolumeWriter) Close() error {
	if m.slices != m.like.Dims[2] {
		return fmt.Errorf("data: %d slices written of a volume of %d", m.slices, m.like.Dims[2])
	}
	if err := m.bw.Flush(); err != nil {
		return err
	}
	if m.z != nil {
		return m.z.Close()
	}
	return nil
}
