package memory

import "testing"

// BenchmarkAllocFree1MiB allocates and frees a 1 MiB float32 buffer: served
// from the cache every time, or from fresh memory because the cache is emptied
// after each free.
func BenchmarkAllocFree1MiB(b *testing.B) {
	const n = 1 << 18 // float32s in 1 MiB
	for _, bc := range []struct {
		name  string
		empty bool
	}{
		{"cached", false},
		{"empty-cache", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := newTestPool(Options{})
			b.SetBytes(4 * n)
			b.ReportAllocs()
			for b.Loop() {
				buf, err := p.Alloc(Activations, 4*n)
				if err != nil {
					b.Fatal(err)
				}
				bytesOf(buf)[0] = 1
				p.MustFree(buf)
				if bc.empty {
					p.EmptyCache()
				}
			}
		})
	}
}
