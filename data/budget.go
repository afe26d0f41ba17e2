package data

import (
	"fmt"
	"sync"
)

// MaxDecodeBytes bounds what decoding one file holds, checked from its
// header before any pixel or voxel is read: the decoder's picture (a
// progressive JPEG's coefficients too) or a volume's stored voxels, and the
// copy made of them beside (see imageFile.imageCost, volumeBytes). 2 GiB
// takes every image of MaxImagePixels but a progressive color JPEG, and
// every volume of up to 2^28 voxels (the former cap) but a float64 one.
const MaxDecodeBytes = 2 << 30

// DefaultDecodeBytes is what the decodes of one dataset may hold at once
// (SourceConfig.DecodeBytes): small images decode one per core, large ones
// fewer, a larger one alone.
const DefaultDecodeBytes = 1 << 30

// budget bounds the bytes concurrent decodes hold: a decode waits until its
// estimate fits beside those running, and one that never would runs alone.
// A nil budget bounds nothing.
type budget struct {
	mu   sync.Mutex
	free *sync.Cond
	max  int64
	held int64
}

func newBudget(max int64) *budget {
	if max <= 0 {
		max = DefaultDecodeBytes
	}
	b := &budget{max: max}
	b.free = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n bytes fit (or nothing else is held) and holds them
// until release is called.
func (b *budget) acquire(n int64) (release func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	for b.held > 0 && b.held+n > b.max {
		b.free.Wait()
	}
	b.held += n
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.held -= n
		b.mu.Unlock()
		b.free.Broadcast()
	}
}

// byteSize writes n bytes for people: "2146689000 bytes (2.00 GiB)",
// "300 bytes".
func byteSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	f, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	return fmt.Sprintf("%d bytes (%.2f %s)", n, f, unit)
}
