package train

import (
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
)

// pagedCPU is the CPU backend's sizes over memory of the given page: what
// plan sees of a device that maps such pages (0: segments).
type pagedCPU struct {
	backend.Backend
	page int64
}

func (b pagedCPU) Allocator() memory.Allocator { return memory.Virtual{Page: b.page} }

// TestCachingReservedNearAllocated: on the seed UNet (base 16, depth 4,
// 128x128, batch 4) and at base 64, 256x256, batch 8, the caching pool
// plans at most 1.25x the allocated peak for every variant, in pages of 2
// MiB (a GPU's, and the host's) and of 64 KiB. (On segments, without
// pages, recompute reserves 1.26x and 1.40x: logged beside.)
func TestCachingReservedNearAllocated(t *testing.T) {
	for _, size := range []struct {
		name                  string
		base, px, batch, data int
	}{{"seed", 16, 128, 4, 8}, {"base64", 64, 256, 8, 16}} {
		c := config.Default()
		c.Model.Base, c.Model.Depth, c.Data.Size, c.Data.Count = size.base, 4, size.px, size.data
		c.Train.BatchSize, c.Memory.Allocator = size.batch, "caching"
		for _, name := range VariantNames() {
			vc, err := DeriveVariant(c, name)
			if err != nil {
				t.Fatal(err)
			}
			ratio := map[int64]float64{}
			for _, page := range []int64{0, 64 << 10, 2 << 20} {
				row, err := PlanConfigOn(vc, pagedCPU{cpu.New(), page})
				if err != nil {
					t.Fatal(err)
				}
				ratio[page] = float64(row.PeakReservedBytes) / float64(row.PeakAllocatedBytes)
				if page > 0 && ratio[page] > 1.25 {
					t.Errorf("%s %s, %s pages: reserved %d is %.3fx the allocated peak %d", size.name, name,
						memory.FormatBytes(page), row.PeakReservedBytes, ratio[page], row.PeakAllocatedBytes)
				}
			}
			t.Logf("%s %-10s reserved/allocated: 64 KiB pages %.3f, 2 MiB pages %.3f, segments %.3f", size.name, name,
				ratio[64<<10], ratio[2<<20], ratio[0])
		}
	}
}
