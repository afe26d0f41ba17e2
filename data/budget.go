package data

import "sync"

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
