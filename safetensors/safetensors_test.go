package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func encode(t testing.TB, tensors []Tensor, meta map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	w := []float32{1, -2.5, float32(math.Inf(1)), 3e-39, 0, float32(math.NaN())}
	in := []Tensor{
		F32Tensor("a.weight", []int{2, 3}, w),
		I64Tensor("a.num_batches_tracked", nil, []int64{-7}),
		{Name: "h", DType: F16, Shape: []int{2}, Data: []byte{0, 0x3c, 0xff, 0x7b}},
		F32Tensor("empty", []int{0, 4}, nil),
	}
	b := encode(t, in, map[string]string{"format": "pt"})
	if n := binary.LittleEndian.Uint64(b); (8+n)%8 != 0 {
		t.Errorf("header of %d bytes leaves the data unaligned", n)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata)
	}
	if len(f.Tensors) != len(in) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(in))
	}
	for i, want := range in {
		got := f.Tensors[i] // data order is the order written
		if got.Name != want.Name || got.DType != want.DType || !bytes.Equal(got.Data, want.Data) || got.Numel() != want.Numel() {
			t.Errorf("tensor %d: got %+v, want %+v", i, got, want)
		}
	}
	a, _ := f.Get("a.weight")
	out := make([]float32, 6)
	if err := a.Float32(out); err != nil {
		t.Fatal(err)
	}
	for i := range w {
		if math.Float32bits(out[i]) != math.Float32bits(w[i]) {
			t.Errorf("value %d: %v, want %v (bitwise)", i, out[i], w[i])
		}
	}
	n, _ := f.Get("a.num_batches_tracked")
	if v, err := n.Int64(); err != nil || !reflect.DeepEqual(v, []int64{-7}) || len(n.Shape) != 0 {
		t.Errorf("scalar: %v %v shape %v", v, err, n.Shape)
	}
}

// TestLayout checks the bytes against the format's definition,
// written out by hand.
func TestLayout(t *testing.T) {
	b := encode(t, []Tensor{F32Tensor("x", []int{1}, []float32{1})}, nil)
	hdr := `{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	want := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	want = append(want, hdr...)
	want = append(want, 0, 0, 0x80, 0x3f) // 1.0f little-endian
	if !bytes.Equal(b, want) {
		t.Errorf("got\n%q\nwant\n%q", b, want)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	good := encode(t, []Tensor{F32Tensor("x", []int{2}, []float32{1, 2}), F32Tensor("y", []int{1}, []float32{3})}, nil)
	withHeader := func(h string, data int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(b, h...), make([]byte, data)...)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"header past end", good[:20], "runs past the end"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, 1<<40), "over the"},
		{"not an object", withHeader(`[1]`, 0), "not a JSON object"},
		{"bad json", withHeader(`{"x":`, 0), "header"},
		{"unknown dtype", withHeader(`{"x":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, 16), "unsupported dtype"},
		{"size mismatch", withHeader(`{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), "needs 12"},
		{"gap", withHeader(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "gap or overlap"},
		{"overlap", withHeader(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), "gap or overlap"},
		{"trailing data", withHeader(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 8), "cover 4 of the 8"},
		{"offsets past end", withHeader(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 2), "outside"},
		{"negative shape", withHeader(`{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0), "negative"},
		{"bad metadata", withHeader(`{"__metadata__":{"a":1}}`, 0), "__metadata__"},
		{"unknown field", withHeader(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"q":1}}`, 4), "unknown field"},
		{"junk after header", withHeader(`{} x`, 0), "after the JSON"},
		// What Write would refuse or could not write, as the reference
		// implementation's serde reads it.
		{"empty name", withHeader(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), `a tensor is named ""`},
		{"key case", withHeader(`{"x":{"dtYpe":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), `tensor "x": key "dtYpe" must be spelled "dtype"`},
		{"key case offsets", withHeader(`{"x":{"dtype":"F32","shape":[1],"Data_Offsets":[0,4]}}`, 4), `must be spelled "data_offsets"`},
		{"field twice", withHeader(`{"x":{"dtype":"F16","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), `key "dtype" appears twice`},
		{"tensor twice", withHeader(`{"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), `key "x" appears twice in the header`},
		{"missing shape", withHeader(`{"x":{"dtype":"F32","data_offsets":[0,4]}}`, 4), `missing field "shape"`},
		{"missing offsets", withHeader(`{"x":{"dtype":"F32","shape":[0]}}`, 0), `missing field "data_offsets"`},
		{"null shape", withHeader(`{"x":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, 4), "not an array"},
		{"null dimension", withHeader(`{"x":{"dtype":"F32","shape":[null],"data_offsets":[0,0]}}`, 0), "not an integer"},
		{"fractional dimension", withHeader(`{"x":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}`, 4), "not an integer"},
		{"three offsets", withHeader(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, 4), "want [begin, end]"},
		{"one offset", withHeader(`{"x":{"dtype":"F32","shape":[0],"data_offsets":[0]}}`, 0), "want [begin, end]"},
		{"negative offset", withHeader(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, 4), "negative"},
		{"dtype not a string", withHeader(`{"x":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, 4), "not a string"},
		{"entry not an object", withHeader(`{"x":[1]}`, 0), "not a JSON object"},
		{"metadata null value", withHeader(`{"__metadata__":{"a":null}}`, 0), "__metadata__"},
		{"metadata key twice", withHeader(`{"__metadata__":{"a":"1","a":"2"}}`, 0), `key "a" appears twice in __metadata__`},
		{"not UTF-8", withHeader("{\"x\xff\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0), "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Parse(good); err != nil {
		t.Errorf("good file refused: %v", err)
	}
	// Another writer's order of keys, whitespace and a null __metadata__
	// (the reference reads it as none) are the same language.
	other := withHeader("{\"__metadata__\":null, \"x\": {\"data_offsets\": [0, 4], \"shape\": [1], \"dtype\": \"F32\"}}", 4)
	if f, err := Parse(other); err != nil || len(f.Tensors) != 1 || f.Metadata != nil {
		t.Errorf("another writer's header: %v, %+v", err, f)
	}
}

func TestWriteRefuses(t *testing.T) {
	var buf bytes.Buffer
	for _, ts := range [][]Tensor{
		{{Name: "x", DType: F32, Shape: []int{2}, Data: make([]byte, 4)}},
		{F32Tensor("x", []int{1}, []float32{1}), F32Tensor("x", []int{1}, []float32{1})},
		{F32Tensor("__metadata__", []int{1}, []float32{1})},
		{F32Tensor("", []int{1}, []float32{1})},
		{{Name: "x", DType: "Q", Shape: []int{1}, Data: make([]byte, 4)}},
	} {
		if err := Write(&buf, ts, nil); err == nil {
			t.Errorf("%v: no error", ts)
		}
	}
}

// FuzzParse: any input is decoded or refused, never a panic, and Parse
// and Write accept the same language: what Parse accepts, Write writes,
// and Parse reads that back to the same tensors (names, types, shapes,
// bytes, in the same order) and metadata; writing those again gives the
// same bytes. testdata/fuzz/FuzzParse keeps the input that found a tensor
// named "" and a key spelled "dtYpe", which Parse took and Write refused.
func FuzzParse(f *testing.F) {
	f.Add(encode(f, []Tensor{F32Tensor("x", []int{2}, []float32{1, 2}), I64Tensor("n", nil, []int64{3})}, map[string]string{"k": "v"}))
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Add(encode(f, []Tensor{F32Tensor("b", []int{0}, nil), F32Tensor("a", []int{0, 3}, nil), {Name: "h", DType: BF16, Shape: []int{1}, Data: []byte{1, 2}}}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, file.Tensors, file.Metadata); err != nil {
			t.Fatalf("Write refuses what Parse accepted: %v", err)
		}
		again, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("Parse refuses what Write wrote: %v\n%q", err, buf.Bytes())
		}
		if len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("%d tensors written, %d read back", len(file.Tensors), len(again.Tensors))
		}
		for i, x := range file.Tensors {
			y := again.Tensors[i]
			if x.Name != y.Name || x.DType != y.DType || !slices.Equal(x.Shape, y.Shape) || !bytes.Equal(x.Data, y.Data) {
				t.Fatalf("tensor %d changed on re-encoding: %q %s %v (%d bytes) became %q %s %v (%d bytes)",
					i, x.Name, x.DType, x.Shape, len(x.Data), y.Name, y.DType, y.Shape, len(y.Data))
			}
			if got, ok := again.Get(x.Name); !ok || got.Name != x.Name {
				t.Fatalf("tensor %q not found by name after re-encoding", x.Name)
			}
		}
		if !maps.Equal(file.Metadata, again.Metadata) { // nil and empty alike: Write writes neither
			t.Fatalf("metadata %v became %v", file.Metadata, again.Metadata)
		}
		var buf2 bytes.Buffer
		if err := Write(&buf2, again.Tensors, again.Metadata); err != nil || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
			t.Fatalf("writing the file read back: %v; bytes differ: %v", err, !bytes.Equal(buf.Bytes(), buf2.Bytes()))
		}
	})
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := encode(t, []Tensor{F32Tensor("x", []int{2}, []float32{1, 2})}, map[string]string{"format": "pt"})
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f, err := ReadFile(write("good.safetensors", good))
	if err != nil {
		t.Fatal(err)
	}
	if x, ok := f.Get("x"); !ok || !bytes.Equal(x.Data, good[len(good)-8:]) {
		t.Errorf("read back %+v", x)
	}
	fifo := filepath.Join(dir, "fifo.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.safetensors")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{fifo, "not a regular file"},
		{zero, "not a regular file"},
		{write("empty.safetensors", nil), "empty file"},
		{write("short.safetensors", good[:5]), "too short"},
		{write("long.safetensors", append(slices.Clone(good), 0, 0, 0, 0)), "cover 8 of the 12"},
		{write("cut.safetensors", good[:len(good)-4]), "outside the 4 data bytes"},
		{write("header.safetensors", binary.LittleEndian.AppendUint64(nil, 1<<20)), "runs past the end"},
	} {
		_, err := ReadFile(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: got %v, want an error naming the file and containing %q", filepath.Base(tc.path), err, tc.want)
		}
	}
}

// TestOpenReadsHeaderFirst: Open gives the layout without the data, Read
// reads only the tensors kept, and a file whose header declares 2 GiB (a
// sparse file) is opened at the cost of its header.
func TestOpenReadsHeaderFirst(t *testing.T) {
	dir := t.TempDir()
	in := []Tensor{F32Tensor("a", []int{2}, []float32{1, 2}), I64Tensor("n", nil, []int64{7}), F32Tensor("b", []int{1}, []float32{3})}
	path := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(path, encode(t, in, map[string]string{"format": "pt"}), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, want := range in {
		got := r.Layout.Tensors[i]
		if got.Name != want.Name || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || got.Data != nil {
			t.Errorf("layout %d: %+v, want %s %s %v without data", i, got, want.Name, want.DType, want.Shape)
		}
	}
	f, err := r.Read(func(name string) bool { return name != "n" })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Get("n"); ok || len(f.Tensors) != 2 || f.Metadata["format"] != "pt" {
		t.Errorf("read %d tensors (n kept: %v), metadata %v; want a and b", len(f.Tensors), ok, f.Metadata)
	}
	for _, want := range []Tensor{in[0], in[2]} {
		if got, ok := f.Get(want.Name); !ok || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s: %+v, want %v", want.Name, got, want.Data)
		}
	}

	hdr := []byte(`{"big":{"dtype":"F32","shape":[536870912],"data_offsets":[0,2147483648]}}`)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	sparse := filepath.Join(dir, "sparse.safetensors")
	if err := os.WriteFile(sparse, append(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))), hdr...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, int64(8+len(hdr))+1<<31); err != nil {
		t.Fatal(err)
	}
	big, err := Open(sparse)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if l := big.Layout.Tensors; len(l) != 1 || l[0].Numel() != 1<<29 || l[0].Data != nil {
		t.Errorf("sparse layout %+v", l)
	}
	if f, err := big.Read(func(string) bool { return false }); err != nil || len(f.Tensors) != 0 {
		t.Errorf("reading none of it: %v, %d tensors", err, len(f.Tensors))
	}
}

// TestNonFinite: NaN and infinities are found by their bit patterns in
// every float type, at their index; the largest finite values, subnormals
// and integer tensors (whose bits may look like them) are not.
func TestNonFinite(t *testing.T) {
	half := func(dt DType, h ...uint16) Tensor {
		b := make([]byte, 0, 2*len(h))
		for _, x := range h {
			b = binary.LittleEndian.AppendUint16(b, x)
		}
		return Tensor{Name: "h", DType: dt, Shape: []int{len(h)}, Data: b}
	}
	at17 := func(v float32) Tensor {
		w := make([]float32, 20)
		w[17] = v
		return F32Tensor("w", []int{4, 5}, w)
	}
	for _, tc := range []struct {
		name  string
		t     Tensor
		index int
		what  string
	}{
		{"f32 finite", F32Tensor("w", []int{4}, []float32{1, -math.MaxFloat32, math.MaxFloat32, math.SmallestNonzeroFloat32}), -1, ""},
		{"f32 NaN", at17(float32(math.NaN())), 17, "NaN"},
		{"f32 +Inf", at17(float32(math.Inf(1))), 17, "+Inf"},
		{"f32 -Inf", at17(float32(math.Inf(-1))), 17, "-Inf"},
		{"f32 negative NaN", F32Tensor("w", []int{1}, []float32{math.Float32frombits(0xffc00001)}), 0, "NaN"},
		{"f16 finite", half(F16, 0x3c00, 0x7bff, 0xfbff, 0x0001), -1, ""},
		{"f16 +Inf", half(F16, 0x3c00, 0x7c00), 1, "+Inf"},
		{"f16 NaN", half(F16, 0x7e00), 0, "NaN"},
		{"f16 -Inf", half(F16, 0, 0, 0xfc00), 2, "-Inf"},
		{"bf16 finite", half(BF16, 0x3f80, 0x7f7f, 0x7c00), -1, ""},
		{"bf16 NaN", half(BF16, 0x3f80, 0x7fc0), 1, "NaN"},
		{"bf16 -Inf", half(BF16, 0xff80), 0, "-Inf"},
		{"i64 all ones", I64Tensor("n", nil, []int64{-1}), -1, ""},
		{"u8", Tensor{Name: "u", DType: U8, Shape: []int{4}, Data: []byte{0xff, 0xff, 0x80, 0x7f}}, -1, ""},
		{"empty", F32Tensor("e", []int{0}, nil), -1, ""},
	} {
		i, what, ok := tc.t.NonFinite()
		if ok != (tc.index >= 0) || ok && (i != tc.index || what != tc.what) {
			t.Errorf("%s: got %d %q %v, want %d %q", tc.name, i, what, ok, tc.index, tc.what)
		}
	}
	w := make([]float32, 20)
	w[17] = float32(math.NaN())
	f, err := Parse(encode(t, []Tensor{F32Tensor("a", []int{2}, []float32{1, 2}), I64Tensor("n", nil, []int64{-1}), F32Tensor("down1.conv.weight", []int{4, 5}, w)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckFinite(); err == nil || err.Error() != `tensor "down1.conv.weight" holds NaN at index 17` {
		t.Errorf("CheckFinite: %v", err)
	}
	f.Tensors = f.Tensors[:2]
	if err := f.CheckFinite(); err != nil {
		t.Errorf("finite tensors refused: %v", err)
	}
}

// TestWriteFromStreams: WriteFrom writes Write's bytes, filling each
// tensor as it goes, and a Fill's error ends the write with it.
func TestWriteFromStreams(t *testing.T) {
	tensors := []Tensor{
		F32Tensor("a", []int{2, 3}, []float32{1, -2, 3.5, 4, 5e-8, -6}),
		I64Tensor("b", []int{}, []int64{-7}),
		F32Tensor("c", []int{0}, nil),
		F32Tensor("d", []int{5}, []float32{9, 8, 7, 6, 5}),
	}
	var want, got bytes.Buffer
	if err := Write(&want, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	var filled []string
	sources := make([]Source, len(tensors))
	for i, tn := range tensors {
		sources[i] = Source{Name: tn.Name, DType: tn.DType, Shape: tn.Shape, Fill: func(dst []byte) error {
			filled = append(filled, tn.Name)
			copy(dst, tn.Data)
			return nil
		}}
	}
	sources[0].Fill = F32Fill(func(dst []float32) { copy(dst, []float32{1, -2, 3.5, 4, 5e-8, -6}) })
	if err := WriteFrom(&got, sources, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("WriteFrom wrote %d bytes unlike Write's %d", got.Len(), want.Len())
	}
	if !slices.Equal(filled, []string{"b", "c", "d"}) {
		t.Errorf("filled %v, want b, c, d in order", filled)
	}
	boom := errors.New("device fault")
	sources[2].Fill = func([]byte) error { return boom }
	if err := WriteFrom(io.Discard, sources, nil); !errors.Is(err, boom) {
		t.Errorf("a failing Fill: %v", err)
	}
}
