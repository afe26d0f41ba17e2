package hostmem

import (
	"testing"
	"unsafe"
)

// TestMapUnmap: a reservation is aligned; a mapped range keeps what is
// written to it; unmapped and mapped again it reads zero, while the ranges
// around it keep their bytes.
func TestMapUnmap(t *testing.T) {
	const page, size = 2 << 20, 8 << 20
	m, b, err := Reserve(size, page)
	if err != nil {
		t.Fatal(err)
	}
	if addr := uintptr(unsafe.Pointer(&b[0])); addr%page != 0 || len(b) != size {
		t.Fatalf("reservation at %#x of %d bytes, want %d-aligned and %d", addr, len(b), page, size)
	}
	if err := Map(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = byte(i%251 + 1)
	}
	if err := Unmap(b[page : 2*page]); err != nil {
		t.Fatal(err)
	}
	if err := Map(b[page : 2*page]); err != nil {
		t.Fatal(err)
	}
	for i, v := range b {
		want := byte(i%251 + 1)
		if i >= page && i < 2*page {
			want = 0
		}
		if v != want {
			t.Fatalf("byte %d is %d, want %d", i, v, want)
		}
	}
	if err := Release(m); err != nil {
		t.Fatal(err)
	}
}
