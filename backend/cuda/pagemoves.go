package cuda

import (
	"errors"
	"fmt"
	"time"

	"github.com/memunet/memunet/memory"
)

// PageMoves is what moving the caching pool's pages costs on a device:
// the time to back one page with memory (cuMemCreate, cuMemMap,
// cuMemSetAccess) and to give it back (cuMemUnmap), each page on its own
// as the pool moves them, with no work outstanding.
type PageMoves struct {
	PageBytes      int64   `json:"page_bytes"`
	Pages          int     `json:"pages"`
	MapUSPerPage   float64 `json:"map_us_per_page"`
	UnmapUSPerPage float64 `json:"unmap_us_per_page"`
}

// MeasurePageMoves maps pages pages of a fresh reservation one at a time,
// then unmaps them one at a time, and returns the mean time of each; an
// error where the device does not map pages.
func (b *Backend) MeasurePageMoves(pages int) (PageMoves, error) {
	a := b.Allocator().(memory.Pager)
	page := a.PageSize()
	if page == 0 {
		return PageMoves{}, errors.New(b.Name() + " has no virtual memory management: the pool takes segments")
	}
	if err := b.Sync(); err != nil {
		return PageMoves{}, err
	}
	s, err := a.Reserve(int64(pages) * page)
	if err != nil {
		return PageMoves{}, err
	}
	defer a.Release(s)
	m := PageMoves{PageBytes: page, Pages: pages}
	start := time.Now()
	for i := range pages {
		if err := a.Map(s, int64(i)*page, page); err != nil {
			for j := range i {
				a.Unmap(s, int64(j)*page, page)
			}
			return PageMoves{}, fmt.Errorf("mapping page %d: %w", i, err)
		}
	}
	m.MapUSPerPage = float64(time.Since(start).Microseconds()) / float64(pages)
	start = time.Now()
	for i := range pages {
		a.Unmap(s, int64(i)*page, page)
	}
	m.UnmapUSPerPage = float64(time.Since(start).Microseconds()) / float64(pages)
	return m, b.failed()
}
