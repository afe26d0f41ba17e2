package backendtest

import (
	"bytes"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// pages checks a backend whose memory pages (memory.Pager) under a caching
// pool of its own: random allocations and frees of half a page to two and
// a half,
// each buffer uploaded with its own bytes; every live buffer downloads
// intact while the pool moves pages between them (unmapping a page a live
// buffer uses, or mapping one twice, would show); reserved peaks at the
// pages live buffers touch; freeing all and emptying the cache leaves
// nothing reserved and no asynchronous error.
func (s *suite) pages(t *testing.T) {
	pg, ok := s.b.Allocator().(memory.Pager)
	if !ok || pg.PageSize() == 0 {
		t.Skipf("%s memory does not page", s.b.Allocator().Name())
	}
	page := pg.PageSize()
	s.run(t, "MoveUnderLiveBuffers", func(c *check) {
		pool := memory.NewPool(s.b.Allocator(), memory.Options{})
		type live struct {
			buf  *memory.Buffer
			want []byte
		}
		var bufs []live
		var mostLive int64
		verify := func(step int) {
			for i, l := range bufs {
				if got := backend.DownloadBytes(c.b, backend.Whole(l.buf, backend.Uint8)); !bytes.Equal(got, l.want) {
					c.Fatalf("step %d: live buffer %d of %d bytes lost its contents", step, i, len(l.want))
				}
			}
		}
		for step := range 80 {
			if len(bufs) > 0 && c.rng.IntN(9) < 4 {
				i := c.rng.IntN(len(bufs))
				pool.MustFree(bufs[i].buf)
				bufs = append(bufs[:i], bufs[i+1:]...)
			} else {
				n := page/2 + c.rng.Int64N(2*page)
				buf, err := pool.Alloc(memory.Activations, n)
				if err != nil {
					c.Fatal(err)
				}
				want := make([]byte, n) // a pattern of its own (random bytes cost seconds at 2 MiB pages)
				seed := byte(c.rng.Uint32())
				for i := range want {
					want[i] = byte(i*31+i>>9) ^ seed
				}
				c.b.Upload(backend.Whole(buf, backend.Uint8), want)
				bufs = append(bufs, live{buf, want})
				mostLive = max(mostLive, int64(len(bufs)))
			}
			if step%10 == 9 {
				verify(step)
			}
		}
		verify(80)
		st := pool.Stats()
		if st.PageBytes != page || st.PagesUnmapped == 0 || st.Reserved.Peak > st.Allocated.Peak+2*page*mostLive {
			c.Errorf("no page moved, or reserved far above allocated: %+v", st)
		}
		for _, l := range bufs {
			pool.MustFree(l.buf)
		}
		pool.EmptyCache()
		if st := pool.Stats(); st.Reserved.Current != 0 {
			c.Errorf("after freeing all and emptying the cache: %d bytes reserved", st.Reserved.Current)
		}
		if err := c.b.Sync(); err != nil {
			c.Errorf("after moving pages: %v", err)
		}
	})
}
