package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/memunet/memunet/infile"
)

// DType is a safetensors element type, spelled as in the format's header.
type DType string

// The element types memunet writes and reads. Others in a file are refused.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	U8   DType = "U8"
)

// Size is the bytes per element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F16, BF16:
		return 2
	case I64:
		return 8
	case U8:
		return 1
	}
	return 0
}

// MaxHeaderBytes bounds a safetensors JSON header (the reference
// implementation's limit is 100 MB).
const MaxHeaderBytes = 100 << 20

// Tensor is one named array: raw little-endian bytes, row-major in Shape
// (an empty Shape is a scalar of one element).
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Numel is the number of elements: the product of Shape (1 for a scalar).
func (t Tensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// F32Tensor makes a float32 tensor from values (copied).
func F32Tensor(name string, shape []int, v []float32) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, DType: F32, Shape: slices.Clone(shape), Data: b}
}

// I64Tensor makes an int64 tensor from values (copied).
func I64Tensor(name string, shape []int, v []int64) Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return Tensor{Name: name, DType: I64, Shape: slices.Clone(shape), Data: b}
}

// Float32 decodes an F32 tensor into dst, which must have Numel elements.
func (t Tensor) Float32(dst []float32) error {
	if t.DType != F32 {
		return fmt.Errorf("tensor %s is %s, want F32", t.Name, t.DType)
	}
	if len(dst)*4 != len(t.Data) {
		return fmt.Errorf("tensor %s has %d values, want %d", t.Name, len(t.Data)/4, len(dst))
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return nil
}

// Int64 decodes an I64 tensor.
func (t Tensor) Int64() ([]int64, error) {
	if t.DType != I64 {
		return nil, fmt.Errorf("tensor %s is %s, want I64", t.Name, t.DType)
	}
	out := make([]int64, len(t.Data)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return out, nil
}

// headerEntry is one tensor's line in the JSON header.
type headerEntry struct {
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Write writes tensors in the safetensors format: an 8-byte
// little-endian header length, the JSON header (padded with spaces to a
// multiple of 8 bytes) mapping each name to its dtype, shape and
// [begin, end) byte offsets, an optional "__metadata__" object of strings,
// then the tensors' bytes back to back in the order given. Names must be
// unique and not "__metadata__"; each tensor's Data must be Numel*Size bytes.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	sources := make([]Source, len(tensors))
	for i, t := range tensors {
		sources[i] = Source{Name: t.Name, DType: t.DType, Shape: t.Shape, Fill: func(dst []byte) error {
			copy(dst, t.Data)
			return nil
		}}
	}
	return writeSources(w, sources, metadata, func(i int, want int64) error {
		if t := tensors[i]; int64(len(t.Data)) != want {
			return fmt.Errorf("safetensors: tensor %s: %d bytes of data, shape %v of %s needs %d", t.Name, len(t.Data), t.Shape, t.DType, want)
		}
		return nil
	})
}

// Source is a tensor WriteFrom writes, its bytes made as they are
// written: Fill writes the tensor's Numel*Size bytes into dst (a buffer
// of that length, reused from tensor to tensor).
type Source struct {
	Name  string
	DType DType
	Shape []int
	Fill  func(dst []byte) error
}

// F32Fill is a Source's Fill for float32 values that read writes into
// the tensor's bytes, viewed as float32s (the host's order), then put in
// little-endian order where the host's is not.
func F32Fill(read func(dst []float32)) func(dst []byte) error {
	return func(dst []byte) error {
		if len(dst) == 0 {
			read(nil)
			return nil
		}
		read(unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), len(dst)/4))
		if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
			for i := 0; i < len(dst); i += 4 {
				binary.LittleEndian.PutUint32(dst[i:], binary.BigEndian.Uint32(dst[i:]))
			}
		}
		return nil
	}
}

// WriteFrom is Write of tensors whose bytes come from their Fill as they
// are written, so that one tensor's bytes are held at a time (a
// checkpoint of a large model and its optimizer state); a Fill's error
// ends the write with it.
func WriteFrom(w io.Writer, sources []Source, metadata map[string]string) error {
	return writeSources(w, sources, metadata, nil)
}

// writeSources writes the header of sources (check, where not nil, may
// refuse source i of want bytes first), then fills and writes each.
func writeSources(w io.Writer, sources []Source, metadata map[string]string, check func(i int, want int64) error) error {
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off, most int64
	for i, t := range sources {
		if t.Name == "" || t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: invalid tensor name %q", t.Name)
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("safetensors: tensor %s listed twice", t.Name)
		}
		if t.DType.Size() == 0 {
			return fmt.Errorf("safetensors: tensor %s: unknown dtype %q", t.Name, t.DType)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors: tensor %s: negative dimension in shape %v", t.Name, t.Shape)
			}
		}
		n := int64(Tensor{Shape: t.Shape}.Numel() * t.DType.Size())
		if check != nil {
			if err := check(i, n); err != nil {
				return err
			}
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = headerEntry{DType: t.DType, Shape: shape, DataOffsets: [2]int64{off, off + n}}
		off += n
		most = max(most, n)
	}
	js, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	buf := make([]byte, most)
	for _, t := range sources {
		b := buf[:Tensor{Shape: t.Shape}.Numel()*t.DType.Size()]
		if err := t.Fill(b); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// File is a decoded safetensors file.
type File struct {
	// Tensors in the order of their data in the file.
	Tensors  []Tensor
	Metadata map[string]string
	byName   map[string]int
}

// Get returns the tensor called name.
func (f *File) Get(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.Tensors[i], true
}

// Parse decodes a whole safetensors file held in b, checking it as the
// reference implementation does: the header length fits, the header is a
// JSON object of known dtypes and non-negative shapes, each tensor's byte
// range matches its shape and type, and the ranges tile the data exactly,
// without gaps or overlaps. The tensors' Data alias b.
func Parse(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("safetensors: %d bytes is too short for the 8-byte header length", len(b))
	}
	n, err := headerLength(b[:8], int64(len(b)))
	if err != nil {
		return nil, err
	}
	data := b[8+n:]
	f, offsets, err := parseHeader(b[8:8+n], int64(len(data)))
	if err != nil {
		return nil, err
	}
	f.attach(data, offsets)
	return f, nil
}

// ReadFile reads the safetensors file at path, refusing what is not a
// regular file (a FIFO, /dev/zero) before reading a byte. The header is
// read and checked first against the file's size, so the data is read only
// when the header describes exactly the bytes the file holds. It is Open
// and Read of every tensor.
func ReadFile(path string) (*File, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Read(nil)
}

// Reader is a safetensors file opened header first: the names, types and
// shapes of its tensors are known, and checked against the file's size,
// before any of their data is read, so that a caller can refuse a file
// that is not what it expects (a sparse file declaring gigabytes) at the
// cost of its header only.
type Reader struct {
	// Layout is the file's tensors in data order, without their Data, and
	// its metadata.
	Layout  *File
	path    string
	src     io.ReaderAt
	closer  io.Closer
	start   int64 // where the data begins in src
	offsets [][2]int64
}

// Open reads and checks the header of the safetensors file at path (at
// most MaxHeaderBytes), refusing what is not a regular file before reading
// a byte. No tensor data is read; the caller closes the Reader.
func Open(path string) (*Reader, error) {
	f, size, err := infile.Open(path, 0)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		f.Close()
		return nil, fmt.Errorf("%s: empty file: not a safetensors file", path)
	}
	r, err := NewReader(f, size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.path, r.closer = path, f
	return r, nil
}

// NewReader reads and checks the header of the safetensors file of size
// bytes in src (not its data); Read reads the tensors from src.
func NewReader(src io.ReaderAt, size int64) (*Reader, error) {
	if size < 8 {
		return nil, fmt.Errorf("safetensors: %d bytes is too short for the 8-byte header length", size)
	}
	var lenBytes [8]byte
	if _, err := src.ReadAt(lenBytes[:], 0); err != nil {
		return nil, err
	}
	n, err := headerLength(lenBytes[:], size)
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, n)
	if _, err := src.ReadAt(hdr, 8); err != nil {
		return nil, err
	}
	layout, offsets, err := parseHeader(hdr, size-8-n)
	if err != nil {
		return nil, err
	}
	return &Reader{Layout: layout, src: src, start: 8 + n, offsets: offsets}, nil
}

// Read reads the tensors keep accepts (nil: all) into a File that owns
// their bytes and lists only them: exactly the bytes the header gives
// them, one allocation.
func (r *Reader) Read(keep func(name string) bool) (*File, error) {
	f := &File{Metadata: r.Layout.Metadata, byName: map[string]int{}}
	var total int64
	var kept []int
	for i, t := range r.Layout.Tensors {
		if keep == nil || keep(t.Name) {
			kept = append(kept, i)
			total += r.offsets[i][1] - r.offsets[i][0]
		}
	}
	data := make([]byte, total)
	var at int64
	for _, i := range kept {
		t, o := r.Layout.Tensors[i], r.offsets[i]
		t.Data = data[at : at+o[1]-o[0] : at+o[1]-o[0]]
		if _, err := r.src.ReadAt(t.Data, r.start+o[0]); err != nil {
			return nil, r.named(fmt.Errorf("tensor %s: %w", t.Name, err))
		}
		at += int64(len(t.Data))
		f.byName[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	return f, nil
}

// Close closes the file Open opened (nothing for NewReader's).
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

func (r *Reader) named(err error) error {
	if r.path == "" {
		return err
	}
	return fmt.Errorf("%s: %w", r.path, err)
}

// headerLength decodes the 8-byte header length of a file of size bytes
// and checks that it fits the limit and the file.
func headerLength(b []byte, size int64) (int64, error) {
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeaderBytes {
		return 0, fmt.Errorf("safetensors: header length %d is over the %d-byte limit", n, MaxHeaderBytes)
	}
	if n > uint64(size-8) {
		return 0, fmt.Errorf("safetensors: header length %d runs past the end of the %d-byte file", n, size)
	}
	return int64(n), nil
}

// parseHeader decodes the JSON header hdr of a file with dataLen bytes of
// tensor data after it: the tensors without their Data, in data order, and
// each one's [begin, end) offsets in the data.
//
// It accepts exactly what Write writes, as the reference implementation
// (serde) reads it: UTF-8; keys spelled exactly ("dtype", "shape",
// "data_offsets", "__metadata__"), each given once and none missing;
// shape and data_offsets arrays of non-negative integers; metadata of
// strings. encoding/json alone would match keys ignoring case, keep the
// last of a repeated key, read null as zero and drop a third offset. Two
// refusals go beyond the reference, as Write never writes either: a
// tensor named "", and another key in a tensor's entry (serde ignores it).
func parseHeader(hdr []byte, dataLen int64) (*File, [][2]int64, error) {
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, nil, fmt.Errorf("safetensors: the header is not a JSON object")
	}
	if !utf8.Valid(hdr) {
		return nil, nil, fmt.Errorf("safetensors: the header is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	f := &File{byName: map[string]int{}}
	type entry struct {
		name string
		headerEntry
	}
	var entries []entry
	err := object(dec, "the header", func(name string) error {
		if name == "__metadata__" {
			m, err := metadataObject(dec)
			if err != nil {
				return fmt.Errorf("__metadata__ must map strings to strings: %v", err)
			}
			f.Metadata = m
			return nil
		}
		if name == "" {
			return fmt.Errorf(`a tensor is named "" (an empty name): every tensor needs a name`)
		}
		e, err := tensorEntry(dec)
		if err != nil {
			return fmt.Errorf("tensor %q: %v", name, err)
		}
		entries = append(entries, entry{name, e})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	if rest := bytes.TrimRight(hdr[dec.InputOffset():], " "); len(rest) > 0 {
		return nil, nil, fmt.Errorf("safetensors: header: %d bytes after the JSON object", len(rest))
	}
	for _, en := range entries {
		name, e := en.name, en.headerEntry
		if e.DType.Size() == 0 {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: unsupported dtype %q", name, e.DType)
		}
		numel := int64(1)
		for _, d := range e.Shape {
			if d > 0 && numel > math.MaxInt64/int64(d)/8 {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: shape %v is too large", name, e.Shape)
			}
			numel *= int64(d)
		}
		lo, hi := e.DataOffsets[0], e.DataOffsets[1]
		if hi < lo || hi > dataLen {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: data offsets [%d, %d) outside the %d data bytes", name, lo, hi, dataLen)
		}
		if want := numel * int64(e.DType.Size()); hi-lo != want {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %d data bytes, shape %v of %s needs %d", name, hi-lo, e.Shape, e.DType, want)
		}
	}
	// Data order; the name breaks ties between empty tensors at one
	// offset, so that the order does not depend on the header's and a
	// file Write wrote again parses to the same list.
	sort.Slice(entries, func(i, j int) bool {
		a, c := entries[i].DataOffsets, entries[j].DataOffsets
		if a != c {
			return a[0] < c[0] || a[0] == c[0] && a[1] < c[1]
		}
		return entries[i].name < entries[j].name
	})
	var at int64
	offsets := make([][2]int64, 0, len(entries))
	for _, e := range entries {
		if e.DataOffsets[0] != at {
			return nil, nil, fmt.Errorf("safetensors: tensor %q starts at data byte %d, want %d (gap or overlap)", e.name, e.DataOffsets[0], at)
		}
		at = e.DataOffsets[1]
		f.byName[e.name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, Tensor{Name: e.name, DType: e.DType, Shape: e.Shape})
		offsets = append(offsets, e.DataOffsets)
	}
	if at != dataLen {
		return nil, nil, fmt.Errorf("safetensors: tensors cover %d of the %d data bytes", at, dataLen)
	}
	return f, offsets, nil
}

// object reads the JSON object next in dec, calling field with each key
// once the decoder stands at its value, which field must consume. A key
// given twice is refused (encoding/json would keep the last silently).
func object(dec *json.Decoder, what string, field func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("header: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%s is not a JSON object", what)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("header: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("header: %v where a key belongs in %s", tok, what)
		}
		if seen[key] {
			return fmt.Errorf("key %q appears twice in %s", key, what)
		}
		seen[key] = true
		if err := field(key); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fmt.Errorf("header: %v", err)
	}
	return nil
}

// metadataObject reads __metadata__'s value: null (none) or an object of
// strings.
func metadataObject(dec *json.Decoder) (map[string]string, error) {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if string(raw) == "null" {
		return nil, nil
	}
	m := map[string]string{}
	in := json.NewDecoder(bytes.NewReader(raw))
	err := object(in, "__metadata__", func(key string) error {
		v, err := in.Token()
		if err != nil {
			return err
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%q is %v, not a string", key, v)
		}
		m[key] = s
		return nil
	})
	return m, err
}

// tensorEntry reads one tensor's entry: exactly the keys Write writes.
func tensorEntry(dec *json.Decoder) (headerEntry, error) {
	keys := [...]string{"dtype", "shape", "data_offsets"} // as headerEntry's tags spell them
	var e headerEntry
	var seen [len(keys)]bool
	err := object(dec, "a tensor's entry", func(key string) error {
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		switch key {
		case "dtype":
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("dtype is %v, not a string such as \"F32\"", v)
			}
			e.DType, seen[0] = DType(s), true
		case "shape":
			dims, err := naturals(v, "shape")
			if err != nil {
				return err
			}
			e.Shape, seen[1] = make([]int, len(dims)), true
			for i, d := range dims {
				e.Shape[i] = int(d)
			}
		case "data_offsets":
			offs, err := naturals(v, "data_offsets")
			if err != nil {
				return err
			}
			if len(offs) != 2 {
				return fmt.Errorf("data_offsets has %d numbers, want [begin, end]", len(offs))
			}
			e.DataOffsets, seen[2] = [2]int64{offs[0], offs[1]}, true
		default:
			for _, k := range keys {
				if strings.EqualFold(key, k) {
					return fmt.Errorf("key %q must be spelled %q (keys are case-sensitive)", key, k)
				}
			}
			return fmt.Errorf("unknown field %q: an entry holds only dtype, shape and data_offsets", key)
		}
		return nil
	})
	if err != nil {
		return e, err
	}
	for i, ok := range seen {
		if !ok {
			return e, fmt.Errorf("missing field %q", keys[i])
		}
	}
	return e, nil
}

// naturals reads a JSON array of non-negative integers (v as decoded with
// UseNumber): no null, no fraction or exponent, nothing above MaxInt.
func naturals(v any, what string) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %v, not an array of integers", what, v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s %v: %v is not an integer", what, arr, x)
		}
		d, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || d > math.MaxInt {
			return nil, fmt.Errorf("%s %v: %s is not an integer from 0 to %d", what, arr, n, math.MaxInt)
		}
		if d < 0 {
			return nil, fmt.Errorf("%s %v holds a negative number", what, arr)
		}
		out[i] = d
	}
	return out, nil
}

// attach points each tensor's Data at its bytes in data.
func (f *File) attach(data []byte, offsets [][2]int64) {
	for i, o := range offsets {
		f.Tensors[i].Data = data[o[0]:o[1]:o[1]]
	}
}

// NonFinite finds the first NaN or infinity of a float tensor (F32, F16,
// BF16): its index in row-major order and "NaN", "+Inf" or "-Inf". ok is
// false when every value is finite or the type is not a float one. It
// tests the bit patterns (an exponent of all ones) in one pass, without
// converting a value.
func (t Tensor) NonFinite() (index int, what string, ok bool) {
	var exp, sign uint32 // the exponent's bits and the sign bit
	at, v := -1, uint32(0)
	switch t.DType {
	case F32:
		exp, sign = 0x7f800000, 1<<31
		for i := 0; i+4 <= len(t.Data); i += 4 {
			if x := binary.LittleEndian.Uint32(t.Data[i:]); x&exp == exp {
				at, v = i/4, x
				break
			}
		}
	case F16, BF16:
		exp, sign = 0x7c00, 1<<15
		if t.DType == BF16 {
			exp = 0x7f80
		}
		for i := 0; i+2 <= len(t.Data); i += 2 {
			if x := uint32(binary.LittleEndian.Uint16(t.Data[i:])); x&exp == exp {
				at, v = i/2, x
				break
			}
		}
	}
	switch {
	case at < 0:
		return 0, "", false
	case v&^(exp|sign) != 0: // a mantissa: NaN
		return at, "NaN", true
	case v&sign != 0:
		return at, "-Inf", true
	}
	return at, "+Inf", true
}

// CheckFinite refuses a file whose float tensors hold a NaN or an
// infinity, naming the first such tensor (in data order) and where: such
// weights make the first step's loss NaN, so a reader refuses them at
// once, not as a training that diverges. Integer tensors are not read.
func (f *File) CheckFinite() error {
	for _, t := range f.Tensors {
		if i, what, ok := t.NonFinite(); ok {
			return fmt.Errorf("tensor %q holds %s at index %d", t.Name, what, i)
		}
	}
	return nil
}
