package data

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Split divides the sample indices 0..n-1 into a training and a validation
// set, deterministically for (n, valFraction, seed). The validation set has
// round(valFraction*n) samples, except that a positive valFraction with
// n >= 2 always leaves at least one sample on each side. A valFraction <= 0
// or NaN gives no validation set; one >= 1 puts every sample there (n >= 1).
// Both results are sorted ascending and together are a permutation of
// 0..n-1. n <= 0 gives two empty slices.
func Split(n int, valFraction float64, seed uint64) (train, val []int) {
	if n <= 0 {
		return []int{}, []int{}
	}
	nVal := 0
	switch {
	case !(valFraction > 0): // also NaN
	case valFraction >= 1:
		nVal = n
	default:
		nVal = int(math.Round(valFraction * float64(n)))
		if n >= 2 {
			nVal = min(max(nVal, 1), n-1)
		}
	}
	// The first nVal of the permutation (stream "split") validate.
	perm := newRand(seed, 0x73706c6974).Perm(n)
	return partition(n, perm[:nVal])
}

// partition splits 0..n-1 into those not in val and those in it (val
// distinct indices), both ascending, in one pass rather than two sorts.
func partition(n int, valIdx []int) (train, val []int) {
	isVal := make([]bool, n)
	for _, i := range valIdx {
		isVal[i] = true
	}
	val, train = make([]int, 0, len(valIdx)), make([]int, 0, n-len(valIdx))
	for i, v := range isVal {
		if v {
			val = append(val, i)
		} else {
			train = append(train, i)
		}
	}
	return train, val
}

// Folds divides the sample indices 0..n-1 for k-fold cross-validation:
// permuted by seed (the permutation Split draws) and cut into k folds of
// near-equal size (n/k, rounded down or up), fold validates and the other
// k-1 train. Over fold = 0..k-1 every index validates exactly once; the
// same (n, k, seed) give the same folds. Both results are sorted
// ascending. A fold with no sample (n < k) validates nothing; k < 1 or a
// fold outside 0..k-1 gives two empty slices.
func Folds(n, k, fold int, seed uint64) (train, val []int) {
	if n <= 0 || k < 1 || fold < 0 || fold >= k {
		return []int{}, []int{}
	}
	perm := newRand(seed, 0x73706c6974).Perm(n) // stream "split", as Split
	return partition(n, perm[fold*n/k:(fold+1)*n/k])
}

// Shuffle returns a new slice holding indices in an order that depends only
// on (indices, seed, epoch): the same arguments give the same order, and
// each epoch a different one. indices is not modified.
func Shuffle(indices []int, seed uint64, epoch int) []int {
	out := slices.Clone(indices)
	if out == nil {
		out = []int{}
	}
	rng := newRand(mix64(seed)^0x73687566, uint64(epoch)) // stream "shuf"
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// FillBatch fills a batch with the samples indices[0..N-1] of ds: images is
// (N, C, H, W) and masks (N, H, W), their lengths exact. The samples are
// generated in parallel, one goroutine per core (at most N). The result is
// the same as calling ds.Sample for each index in turn. On error it returns
// the error of the first failing batch position, naming it; the buffers'
// contents are then unspecified.
func FillBatch(ds Dataset, indices []int, images []float32, masks []uint8) error {
	return fillBatch(ds, indices, images, masks, ds.Sample)
}

// fillBatch is FillBatch taking each sample with sample (ds.Sample, or a
// Loader's epoch's patch).
func fillBatch(ds Dataset, indices []int, images []float32, masks []uint8, sample func(i int, img []float32, mask []uint8) error) error {
	c := ds.Channels()
	h, w := ds.Size()
	n := len(indices)
	img, px := c*h*w, h*w
	if len(images) != n*img {
		return fmt.Errorf("data: batch images buffer has %d values, want N*C*H*W = %d*%d*%d*%d = %d", len(images), n, c, h, w, n*img)
	}
	if len(masks) != n*px {
		return fmt.Errorf("data: batch masks buffer has %d values, want N*H*W = %d*%d*%d = %d", len(masks), n, h, w, n*px)
	}
	if n == 0 {
		return nil
	}
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for {
				if failed.Load() {
					return // positions already taken still finish, so the lowest failing one is found
				}
				b := int(next.Add(1) - 1)
				if b >= n {
					return
				}
				if err := sample(indices[b], images[b*img:(b+1)*img], masks[b*px:(b+1)*px]); err != nil {
					errs[b] = fmt.Errorf("data: batch position %d: %w", b, err)
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
