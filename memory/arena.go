package memory

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Trace is a pool's recorded allocation history (Options.Trace): every
// allocation and free in order, and the phases (Pool.BeginPhase) they fell
// in. A dry run's trace is what PlanArena packs.
type Trace struct {
	Events []TraceEvent
}

// TraceEvent is one allocation (Size > 0), free (Size == 0) or phase mark
// (Phase set; "" ends the phase).
type TraceEvent struct {
	ID    uint64
	Size  int64
	Cat   Category
	Phase string
	Mark  bool
}

// Slot is one planned allocation: its rounded size and category, and its
// offset in the arena.
type Slot struct {
	Size int64    `json:"size"`
	Cat  Category `json:"category"`
	Off  int64    `json:"offset"`
}

// ArenaPlan places every allocation of a run in one block of Size bytes.
// Build is the allocations made before the first phase, in order; those
// still live when it ends (parameters, gradients, optimizer state, batch
// buffers) keep their place for the whole run. Phases holds each phase's
// allocations in order ("step", "validate"): a phase frees what it
// allocates, so all phases share the space above the lasting buffers.
type ArenaPlan struct {
	Size   int64             `json:"size"`
	Build  []Slot            `json:"build"`
	Phases map[string][]Slot `json:"phases"`
	// Lasting is the bytes of build allocations live at its end.
	Lasting int64 `json:"lasting"`
}

// interval is an allocation with its lifetime [start, end) in event
// indices, to be given an offset.
type interval struct {
	size, start, end int64
	off              int64
	order            int
}

// packIntervals gives each interval an offset such that intervals live at
// the same time do not overlap, and returns the extent. Greedy by size, the
// largest first, each at the best-fitting gap (the smallest that holds it)
// among the placed intervals its lifetime overlaps, else on top: the
// heuristic of TensorFlow Lite's GreedyBySize and ggml-alloc's best fit,
// chosen because activations come in a few large sizes whose placement
// decides the extent. Where buffers of close sizes interleave (the tensors
// checkpointing keeps, among a step's larger ones) that order can leave
// gaps, so unless it reaches the floor, the most bytes live at once, it is
// tried again packRetries times in an order of sizes each taken up to a
// quarter larger at random, from a fixed seed (the same plan every time),
// and the smallest extent wins.
func packIntervals(iv []*interval) int64 {
	keys := make([]int64, len(iv))
	for i, x := range iv {
		keys[i] = x.size
	}
	extent, floor := packInOrder(iv, keys), mostLive(iv)
	if extent == floor {
		return extent
	}
	best := make([]int64, len(iv))
	keep := func() {
		for i, x := range iv {
			best[i] = x.off
		}
	}
	keep()
	rng := rand.NewPCG(1, 2) // its output is fixed by its seed, in every Go release
	for range packRetries {
		for i, x := range iv {
			keys[i] = x.size + int64(rng.Uint64()%uint64(x.size/4+1))
		}
		if e := packInOrder(iv, keys); e < extent {
			extent = e
			keep()
			if e == floor {
				break
			}
		}
	}
	for i, x := range iv {
		x.off = best[i]
	}
	return extent
}

// packRetries is how many perturbed orders packIntervals tries: over the
// plan grid (testdata/plan), 128 find 0.005% less than 64 in all, and 32
// left one arena 0.5% larger than before the ReLUs kept masks.
const packRetries = 64

// packInOrder places the intervals greedily, the largest key first (ties in
// order of start), each at the best-fitting gap, and returns the extent.
func packInOrder(iv []*interval, keys []int64) int64 {
	order := make([]int, len(iv))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(keys[b], keys[a]); c != 0 {
			return c
		}
		return cmp.Compare(iv[a].start, iv[b].start)
	})
	placed := make([]*interval, 0, len(iv)) // by offset
	var extent int64
	for _, i := range order {
		x := iv[i]
		var best, bestGap int64 = -1, -1
		var prevEnd int64
		for _, y := range placed {
			if y.end <= x.start || x.end <= y.start {
				continue // not live at the same time
			}
			if gap := y.off - prevEnd; gap >= x.size && (bestGap < 0 || gap < bestGap) {
				best, bestGap = prevEnd, gap
			}
			prevEnd = max(prevEnd, y.off+y.size)
		}
		if best < 0 {
			best = prevEnd
		}
		x.off = best
		extent = max(extent, x.off+x.size)
		j, _ := slices.BinarySearchFunc(placed, x, func(a, b *interval) int { return cmp.Compare(a.off, b.off) })
		placed = slices.Insert(placed, j, x)
	}
	return extent
}

// mostLive is the most bytes the intervals hold at once: no packing is
// smaller. An interval ending where another starts does not overlap it.
func mostLive(iv []*interval) int64 {
	type change struct{ at, bytes int64 }
	changes := make([]change, 0, 2*len(iv))
	for _, x := range iv {
		changes = append(changes, change{x.start, x.size}, change{x.end, -x.size})
	}
	slices.SortFunc(changes, func(a, b change) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.bytes, b.bytes) // frees first
	})
	var live, most int64
	for _, c := range changes {
		live += c.bytes
		most = max(most, live)
	}
	return most
}

// PlanArena packs a dry run's trace into an ArenaPlan. Every phase's
// instances must allocate the same sequence (the last instance is packed)
// and free everything they allocate; a trace that breaks this is an error
// naming the phase.
func PlanArena(tr Trace) (ArenaPlan, error) {
	plan := ArenaPlan{Phases: map[string][]Slot{}}
	// Build: the events before the first phase.
	first := slices.IndexFunc(tr.Events, func(e TraceEvent) bool { return e.Mark })
	if first < 0 {
		first = len(tr.Events)
	}
	freed := map[uint64]bool{}
	for _, e := range tr.Events {
		if !e.Mark && e.Size == 0 {
			freed[e.ID] = true
		}
	}
	build := tr.Events[:first]
	buildFreed := map[uint64]int64{}
	for i, e := range build {
		if !e.Mark && e.Size == 0 {
			buildFreed[e.ID] = int64(i)
		}
	}
	var lasting int64
	var temps []*interval
	for i, e := range build {
		if e.Mark || e.Size == 0 {
			continue
		}
		s := Slot{Size: e.Size, Cat: e.Cat}
		if end, ok := buildFreed[e.ID]; ok {
			temps = append(temps, &interval{size: e.Size, start: int64(i), end: end, order: len(plan.Build)})
		} else {
			s.Off = lasting // lasting buffers side by side from 0, in order
			lasting += e.Size
		}
		plan.Build = append(plan.Build, s)
	}
	plan.Lasting = lasting
	top := lasting + packIntervals(temps)
	for _, x := range temps {
		plan.Build[x.order].Off = lasting + x.off
	}
	// Phases: the last instance of each.
	type instance struct {
		name       string
		start, end int
	}
	var instances []instance
	for i := first; i < len(tr.Events); i++ {
		e := tr.Events[i]
		if !e.Mark || e.Phase == "" {
			continue
		}
		j := i + 1
		for j < len(tr.Events) && !(tr.Events[j].Mark && tr.Events[j].Phase == "") {
			j++
		}
		if j == len(tr.Events) {
			return plan, planError("phase %q does not end", e.Phase)
		}
		instances = append(instances, instance{e.Phase, i + 1, j})
		i = j
	}
	sequences := map[string][]Slot{}
	for _, in := range instances {
		events := tr.Events[in.start:in.end]
		allocAt, freeAt := map[uint64]int64{}, map[uint64]int64{}
		var slots []Slot
		var iv []*interval
		for k, e := range events {
			switch {
			case e.Mark:
				return plan, planError("phase %q inside phase %q", e.Phase, in.name)
			case e.Size > 0:
				allocAt[e.ID] = int64(k)
				iv = append(iv, &interval{size: e.Size, start: int64(k), end: -1, order: len(slots)})
				slots = append(slots, Slot{Size: e.Size, Cat: e.Cat})
			default:
				freeAt[e.ID] = int64(k)
			}
		}
		ids := make([]uint64, 0, len(allocAt))
		for _, e := range events {
			if e.Size > 0 {
				ids = append(ids, e.ID)
			}
		}
		for n, id := range ids {
			end, ok := freeAt[id]
			if !ok {
				return plan, planError("an allocation of %s (%s) in phase %q outlives it", FormatBytes(slots[n].Size), slots[n].Cat, in.name)
			}
			iv[n].end = end
		}
		if prev, ok := sequences[in.name]; ok && !sameSizes(prev, slots) {
			return plan, planError("phase %q allocates differently from one time to the next", in.name)
		}
		sequences[in.name] = slots
		extent := packIntervals(iv)
		for _, x := range iv {
			slots[x.order].Off = lasting + x.off
		}
		plan.Phases[in.name] = slots
		top = max(top, lasting+extent)
	}
	plan.Size = top
	return plan, nil
}

// ArenaPlanError is PlanArena's refusal: a trace it cannot turn into a
// plan (a phase that keeps a buffer past its end, or allocates differently
// each time).
type ArenaPlanError struct{ Why string }

func (e *ArenaPlanError) Error() string { return "the run cannot be planned into an arena: " + e.Why }

func planError(format string, args ...any) error {
	return &ArenaPlanError{Why: fmt.Sprintf(format, args...)}
}

func sameSizes(a, b []Slot) bool {
	return slices.EqualFunc(a, b, func(x, y Slot) bool { return x.Size == y.Size && x.Cat == y.Cat })
}
