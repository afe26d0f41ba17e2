package train

import (
	"fmt"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
)

// PatchSuggestion is the largest square data.patch whose planned run fits
// a capacity, and the next size up that does not.
type PatchSuggestion struct {
	// Size is the patch side (a multiple of 2^model.depth); Row its plan.
	Size int
	Row  PlanRow
	// Next is the next multiple up (0 when Size is already the images'
	// side) and NextBytes its planned peak reserved bytes.
	Next      int
	NextBytes int64
	// Limit is the largest side tried: the smaller side of the largest
	// image (a patch need not be larger than the images).
	Limit int
}

// SuggestPatch finds the largest square data.patch (a cube for volumes), a multiple of
// 2^model.depth no larger than the images' smaller side, whose exact plan
// (cfg's variant: precision, recompute, batch) fits capacity in reserved
// bytes and, where host > 0, whose need of host memory (HostNeed: the pool
// and the buffers beside it, for a pool in host memory) fits host, by
// bisection over the planned peaks (they grow with the patch).
func SuggestPatch(cfg config.Config, capacity, host int64) (PatchSuggestion, error) {
	if capacity <= 0 {
		return PatchSuggestion{}, fmt.Errorf("plan --suggest patch needs a capacity: give --capacity SIZE (e.g. 4GiB) or set memory.capacity")
	}
	if cfg.Model.Volumes() && cfg.Data.Source == data.SourceSynthetic {
		return PatchSuggestion{}, fmt.Errorf("plan --suggest patch: synthetic volumes (data.source synthetic, model.dims 3) train whole, without data.patch; plan data.size instead (--set data.size=N), or suggest patches of NIfTI volumes (data.source: nifti)")
	}
	f := 1 << cfg.Model.Depth
	limit, err := patchLimit(cfg, f)
	if err != nil {
		return PatchSuggestion{}, err
	}
	plan := func(side int) (PlanRow, error) {
		c := cfg
		c.Data.Patch = patchOf(cfg, side)
		row, err := PlanConfig(c)
		if err == nil && row.Error != "" {
			err = fmt.Errorf("%s", row.Error)
		}
		return row, err
	}
	fits := func(row PlanRow) bool {
		need, _ := HostNeed(row)
		return row.PeakReservedBytes <= capacity && (host <= 0 || need <= host)
	}
	s := PatchSuggestion{Limit: limit}
	lo, hi := 0, limit/f // lo fits (0: none known), hi+1 does not
	var rows = map[int]PlanRow{}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		row, err := plan(mid * f)
		if err != nil {
			return s, err
		}
		rows[mid] = row
		if fits(row) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		row, err := plan(f)
		if err != nil {
			return s, err
		}
		limit, need := capacity, row.PeakReservedBytes
		if host > 0 && (need <= capacity || host < capacity) {
			limit = host
			need, _ = HostNeed(row)
		}
		return s, fmt.Errorf("no patch fits %s: the smallest, %v, needs %s; lower train.batch_size or model.base, or use model.checkpoint or train.precision to save memory",
			memory.FormatBytes(limit), patchOf(cfg, f), memory.FormatBytes(need))
	}
	s.Size, s.Row = lo*f, rows[lo]
	if lo*f+f <= limit {
		next, ok := rows[lo+1]
		if !ok {
			if next, err = plan(lo*f + f); err != nil {
				return s, err
			}
		}
		s.Next, s.NextBytes = lo*f+f, next.PeakReservedBytes
	}
	return s, nil
}

// patchOf is the square patch of a side (a cube for volumes).
func patchOf(cfg config.Config, side int) []int {
	if cfg.Model.Volumes() {
		return []int{side, side, side}
	}
	return []int{side, side}
}

// patchLimit is the smaller side of the largest image cfg's data holds
// (after data.resize; a volume's smallest side), rounded down to a
// multiple of f.
func patchLimit(cfg config.Config, f int) (int, error) {
	c := cfg
	c.Data.Patch = patchOf(cfg, f) // opens images of any size
	set, err := OpenSet(c)
	if err != nil {
		return 0, err
	}
	side := 0
	if r := cfg.Data.Resize; len(r) == 2 {
		side = min(r[0], r[1])
	}
	for _, sz := range set.Report.Sizes {
		if len(cfg.Data.Resize) == 0 {
			side = max(side, min(sz.H, sz.W))
		}
	}
	if d := set.Report.MaxDepth; cfg.Model.Volumes() && d > 0 {
		side = min(side, d)
	}
	if side < f {
		return 0, fmt.Errorf("the images' smaller side, %d, is below 2^model.depth = %d: no patch to suggest", side, f)
	}
	return side / f * f, nil
}
