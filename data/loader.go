package data

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// DefaultPrefetch is how many micro-batches a Loader decodes ahead.
const DefaultPrefetch = 2

// LoaderConfig describes the order of a Loader's micro-batches.
type LoaderConfig struct {
	// Batch is the samples per micro-batch.
	Batch int
	// PerEpoch is the micro-batches per epoch, at most len(indices)/Batch;
	// the samples of an epoch beyond PerEpoch*Batch are not used in it.
	PerEpoch int
	// Seed decides the shuffle of every epoch (with Shuffle) and the flips.
	Seed uint64
	// Flip mirrors each sample left-right with probability 1/2, decided by
	// (Seed, epoch, sample index) alone (config key data.flip).
	Flip bool
	// Augment is the rest of the augmentation (data.augment), drawn from
	// (Seed, epoch, sample index) too.
	Augment Augment
	// Prefetch is the micro-batches decoded ahead (0: DefaultPrefetch).
	Prefetch int
	// Rank and World split every micro-batch between the processes of a
	// data-parallel run: the epoch's order is the same on every rank, a
	// micro-batch covers Batch*World samples of it, and rank r takes the
	// r-th Batch of them. World 0 or 1 is one process.
	Rank, World int
}

// world is the number of ranks sharing each micro-batch.
func (c LoaderConfig) world() int { return max(c.World, 1) }

// span is the positions in an epoch's order of micro-batch pos's samples
// for this rank.
func (c LoaderConfig) span(pos int) (lo, hi int) {
	lo = (pos*c.world() + c.Rank) * c.Batch
	return lo, lo + c.Batch
}

// Loader yields the training micro-batches of an index set in a fixed
// order: micro-batch m is position m % PerEpoch of epoch m / PerEpoch, whose
// samples are Shuffle(indices, Seed, epoch)[pos*Batch : (pos+1)*Batch],
// each flipped or not as LoaderConfig.Flip says. The order depends only on
// the arguments, so a run resumed at micro-batch m (its position in the
// epoch; see Position) gets exactly the batches an uninterrupted run would.
//
// A background goroutine decodes the micro-batches after the last one
// asked for into a bounded queue of Prefetch batches (each filled, then
// augmented, a sample per goroutine as FillBatch does) while the caller
// trains on the current one. The
// queue's buffers are ordinary Go memory, not the memory pool: they are the
// host-side staging of a data loader; Batch copies a micro-batch into the
// caller's (pool) buffers. Asking for another micro-batch than the next one
// (a resume, or a step run again after running out of memory) restarts the
// queue there.
//
// Batch and Close must be called from one goroutine at a time.
type Loader struct {
	ds      Dataset
	indices []int
	cfg     LoaderConfig
	imgLen  int
	maskLen int

	// The running producer; nil when none runs.
	run   *loaderRun
	slots []*loaderSlot
}

type loaderSlot struct {
	micro  int
	images []float32
	masks  []uint8
	err    error
}

type loaderRun struct {
	next int // micro-batch the queue delivers next
	out  chan *loaderSlot
	free chan *loaderSlot
	stop chan struct{}
}

// NewLoader makes a loader over ds's samples indices (which it copies).
// Nothing is decoded until the first Batch.
func NewLoader(ds Dataset, indices []int, cfg LoaderConfig) (*Loader, error) {
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("data: loader batch %d: must be at least 1", cfg.Batch)
	}
	if cfg.Rank < 0 || cfg.Rank >= cfg.world() {
		return nil, fmt.Errorf("data: loader rank %d of %d", cfg.Rank, cfg.world())
	}
	if cfg.PerEpoch < 1 || cfg.PerEpoch > len(indices)/(cfg.Batch*cfg.world()) {
		return nil, fmt.Errorf("data: loader with %d micro-batches of %d x %d ranks per epoch needs %d samples, has %d",
			cfg.PerEpoch, cfg.Batch, cfg.world(), cfg.PerEpoch*cfg.Batch*cfg.world(), len(indices))
	}
	if cfg.Prefetch <= 0 {
		cfg.Prefetch = DefaultPrefetch
	}
	h, w := ds.Size()
	return &Loader{ds: ds, indices: slices.Clone(indices), cfg: cfg,
		imgLen: cfg.Batch * ds.Channels() * h * w, maskLen: cfg.Batch * h * w}, nil
}

// Position splits micro-batch m into its 0-based epoch and position within
// the epoch.
func (l *Loader) Position(m int) (epoch, pos int) { return m / l.cfg.PerEpoch, m % l.cfg.PerEpoch }

// Samples returns the sample indices of micro-batch m, in batch order.
func (l *Loader) Samples(m int) []int {
	epoch, pos := l.Position(m)
	order := Shuffle(l.indices, l.cfg.Seed, epoch)
	lo, hi := l.cfg.span(pos)
	return order[lo:hi]
}

// Flipped reports whether sample i is mirrored in the given 0-based epoch.
func (l *Loader) Flipped(epoch, i int) bool {
	if !l.cfg.Flip {
		return false
	}
	return mix64(mix64(mix64(l.cfg.Seed^0x666c6970)+uint64(epoch))+uint64(i))&1 == 1 // stream "flip"
}

// Batch fills images (Batch, C, H, W) and masks (Batch, H, W) with
// micro-batch m and returns its 1-based epoch. An error names the
// micro-batch and the file that failed.
func (l *Loader) Batch(m int, images []float32, masks []uint8) (epoch int, err error) {
	if m < 0 {
		return 0, fmt.Errorf("data: micro-batch %d: must be 0 or more", m)
	}
	if len(images) != l.imgLen || len(masks) != l.maskLen {
		return 0, fmt.Errorf("data: loader buffers have %d and %d values, want %d and %d", len(images), len(masks), l.imgLen, l.maskLen)
	}
	if l.run == nil || l.run.next != m {
		l.restart(m)
	}
	s, ok := <-l.run.out
	if !ok || s.micro != m { // the producer stopped after an error
		l.restart(m)
		s = <-l.run.out
	}
	l.run.next = m + 1
	if s.err != nil {
		err := s.err
		l.run.free <- s
		l.stop() // the producer has returned; start afresh next time
		return 0, err
	}
	copy(images, s.images)
	copy(masks, s.masks)
	l.run.free <- s
	e, _ := l.Position(m)
	return e + 1, nil
}

// Close stops the background decoding. The loader may be used again after.
func (l *Loader) Close() { l.stop() }

func (l *Loader) stop() {
	if l.run == nil {
		return
	}
	close(l.run.stop)
	for range l.run.out { // wait until the producer has returned
	}
	l.run = nil
}

func (l *Loader) restart(m int) {
	l.stop()
	n := l.cfg.Prefetch + 1 // the queue plus the one being filled
	for len(l.slots) < n {
		l.slots = append(l.slots, &loaderSlot{images: make([]float32, l.imgLen), masks: make([]uint8, l.maskLen)})
	}
	r := &loaderRun{next: m, out: make(chan *loaderSlot, l.cfg.Prefetch), free: make(chan *loaderSlot, n), stop: make(chan struct{})}
	for _, s := range l.slots {
		r.free <- s
	}
	l.run = r
	go l.produce(r, m)
}

// produce fills micro-batches m, m+1, ... until stopped or an error.
func (l *Loader) produce(r *loaderRun, m int) {
	defer close(r.out)
	epoch, order := -1, []int(nil)
	for ; ; m++ {
		var s *loaderSlot
		select {
		case s = <-r.free:
		case <-r.stop:
			return
		}
		e, pos := l.Position(m)
		if e != epoch {
			epoch, order = e, Shuffle(l.indices, l.cfg.Seed, e)
		}
		lo, hi := l.cfg.span(pos)
		s.micro = m
		s.err = l.fill(e, order[lo:hi], s.images, s.masks)
		if s.err != nil {
			s.err = fmt.Errorf("epoch %d, micro-batch %d of the epoch: %w", e+1, pos+1, s.err)
		}
		select {
		case r.out <- s:
		case <-r.stop:
			return
		}
		if s.err != nil {
			return
		}
	}
}

func (l *Loader) fill(epoch int, idx []int, images []float32, masks []uint8) error {
	sample := l.ds.Sample
	if p, ok := l.ds.(epochSampler); ok { // random patches: drawn from (seed, epoch, sample)
		sample = func(i int, img []float32, mask []uint8) error { return p.sampleEpoch(i, l.cfg.Seed, epoch, img, mask) }
	}
	if err := fillBatch(l.ds, idx, images, masks, sample); err != nil {
		return err
	}
	c := l.ds.Channels()
	h, w := l.ds.Size() // a volume's d slices stacked
	d := DepthOf(l.ds)
	defer func() {
		if !l.cfg.Augment.Any() {
			return
		}
		// The samples in parallel, as they are decoded: each draws from its own generator.
		parallel(len(idx), func(b int) {
			l.cfg.Augment.apply(augmentRand(l.cfg.Seed, epoch, idx[b]), images[b*c*h*w:(b+1)*c*h*w], masks[b*h*w:(b+1)*h*w], c, d, h/d, w)
		})
	}()
	if !l.cfg.Flip {
		return nil
	}
	for b, i := range idx {
		if !l.Flipped(epoch, i) {
			continue
		}
		for ch := range c {
			plane := images[(b*c+ch)*h*w : (b*c+ch+1)*h*w]
			for y := range h {
				slices.Reverse(plane[y*w : (y+1)*w])
			}
		}
		m := masks[b*h*w : (b+1)*h*w]
		for y := range h {
			slices.Reverse(m[y*w : (y+1)*w])
		}
	}
	return nil
}

// parallel calls f(0), ..., f(n-1) on up to GOMAXPROCS goroutines and
// returns when all have returned.
func parallel(n int, f func(b int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for b := int(next.Add(1) - 1); b < n; b = int(next.Add(1) - 1) {
				f(b)
			}
		})
	}
	wg.Wait()
}

// Config returns the loader's configuration (Prefetch resolved).
func (l *Loader) Config() LoaderConfig { return l.cfg }
