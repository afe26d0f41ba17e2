package train

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// ChooseRecompute resolves model.checkpoint: auto on backend b: the levels
// to recompute so that the run's planned reserved peak fits
// memory.capacity with the least recompute. Recompute is additive over
// levels (each recomputed level runs its blocks' forward again, a bilinear
// decoder's but its conv1), so the subsets of the depth+1 levels are
// planned, exactly, in order of their recompute FLOPs (ties: more levels
// first, the smaller memory), and the first that fits wins: a small
// knapsack solved by the plan. Without a capacity nothing needs to fit and
// no level recomputes; when nothing fits, every level does (the least
// memory), and the capacity check says the rest. cfg is returned unchanged
// when it is not auto; note says what was chosen.
func ChooseRecompute(cfg config.Config, b backend.Backend) (config.Config, string, error) {
	if !cfg.Model.Checkpoint.Auto {
		return cfg, "", nil
	}
	capacity := int64(cfg.Memory.Capacity)
	if capacity <= 0 {
		cfg.Model.Checkpoint = config.Checkpoint{}
		return cfg, "model.checkpoint: auto: no memory.capacity to fit, so no level is checkpointed", nil
	}
	depth := cfg.Model.Depth
	h, w := cfg.ImageSize()
	recompute := make([]float64, depth+1)
	var forward float64 // one forward pass, the same whatever recomputes
	for l := range recompute {
		mc := cfg.ModelConfig()
		mc.Recompute = []int{l}
		net, err := model.New(model.NewDevice(noop.New(cpu.New()), memory.Options{}), mc, 1)
		if err != nil {
			return cfg, "", err
		}
		forward, recompute[l] = net.FLOPs(h, w)
		net.Free()
	}
	type subset struct {
		levels []int
		cost   float64
	}
	var subsets []subset
	for mask := range 1 << (depth + 1) {
		var s subset
		for l := range depth + 1 {
			if mask&(1<<l) != 0 {
				s.levels = append(s.levels, l)
				s.cost += recompute[l]
			}
		}
		subsets = append(subsets, s)
	}
	slices.SortStableFunc(subsets, func(a, b subset) int {
		if c := cmp.Compare(a.cost, b.cost); c != 0 {
			return c
		}
		return cmp.Compare(len(b.levels), len(a.levels))
	})
	tried := 0
	for _, s := range subsets {
		c := cfg
		c.Model.Checkpoint = config.Checkpoint{Levels: s.levels}
		row, err := planConfigOn(c, b)
		if err != nil {
			return cfg, "", err
		}
		tried++
		if row.PeakReservedBytes <= capacity {
			return c, fmt.Sprintf("model.checkpoint: auto: %s, planned peak %s reserved fits memory.capacity %s with the least recompute (%.0f%% of a forward pass; %d of %d level sets planned)",
				c.Model.Checkpoint, memory.FormatBytes(row.PeakReservedBytes), memory.FormatBytes(capacity),
				100*s.cost/max(forward, 1), tried, len(subsets)), nil
		}
	}
	cfg.Model.Checkpoint = config.Checkpoint{All: true}
	return cfg, fmt.Sprintf("model.checkpoint: auto: no set of levels fits memory.capacity %s; checkpointing all of them, the least memory", memory.FormatBytes(capacity)), nil
}
