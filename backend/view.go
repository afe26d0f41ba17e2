package backend

import (
	"fmt"

	"github.com/memunet/memunet/memory"
)

// View is Len values of type DT starting at value Off of a pool buffer: what
// every operation reads and writes. A view holds no memory of its own; the
// buffer's owner (a model.Tensor, a Param, the optimizer) keeps it alive.
// The zero View is "none" (an absent bias or gradient).
type View struct {
	Buf      *memory.Buffer
	DT       DType
	Off, Len int // in values of DT
}

// Whole is all of b as values of dt.
func Whole(b *memory.Buffer, dt DType) View {
	return View{Buf: b, DT: dt, Len: int(b.Len()) / dt.Size()}
}

// None reports the zero View.
func (v View) None() bool { return v.Buf == nil }

// Slice is values [lo, hi) of v.
func (v View) Slice(lo, hi int) View {
	if lo < 0 || hi < lo || hi > v.Len {
		panic(fmt.Sprintf("backend: slice [%d:%d] of a view of %d values", lo, hi, v.Len))
	}
	return View{Buf: v.Buf, DT: v.DT, Off: v.Off + lo, Len: hi - lo}
}

// Halves splits v in two equal views (a norm's saved mean and invstd).
func (v View) Halves() (View, View) { return v.Slice(0, v.Len/2), v.Slice(v.Len/2, v.Len) }

// Bytes is the view's length in bytes.
func (v View) Bytes() int { return v.Len * v.DT.Size() }

func (v View) String() string {
	if v.None() {
		return "View(none)"
	}
	return fmt.Sprintf("View(%s [%d:%d])", v.DT, v.Off, v.Off+v.Len)
}
