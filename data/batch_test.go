package data

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func isPermutation(xs []int, n int) bool {
	s := slices.Sorted(slices.Values(xs))
	for k, v := range s {
		if v != k {
			return false
		}
	}
	return len(s) == n
}

func TestSplit(t *testing.T) {
	tests := []struct {
		n       int
		frac    float64
		wantVal int
	}{
		{100, 0.1, 10},
		{100, 0.25, 25},
		{256, 0.1, 26},
		{10, 0, 0},
		{10, -1, 0},
		{10, math.NaN(), 0},
		{10, 0.01, 1}, // positive fraction: at least one val sample
		{10, 0.99, 9}, // and at least one train sample
		{10, 1, 10},   // everything to val
		{1, 0.5, 1},   // round(0.5) = 1; n = 1 leaves no room for both sides
		{2, 0.5, 1},
		{0, 0.5, 0},
		{-4, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d,frac=%v", tt.n, tt.frac), func(t *testing.T) {
			train, val := Split(tt.n, tt.frac, 3)
			if len(val) != tt.wantVal {
				t.Errorf("len(val) = %d, want %d", len(val), tt.wantVal)
			}
			all := append(slices.Clone(train), val...)
			if !isPermutation(all, max(tt.n, 0)) {
				t.Errorf("train %v + val %v is not a permutation of 0..%d", train, val, tt.n-1)
			}
			if !slices.IsSorted(train) || !slices.IsSorted(val) {
				t.Errorf("not sorted: train %v val %v", train, val)
			}
			if train == nil || val == nil {
				t.Errorf("nil result")
			}
			train2, val2 := Split(tt.n, tt.frac, 3)
			if !slices.Equal(train, train2) || !slices.Equal(val, val2) {
				t.Errorf("not deterministic")
			}
		})
	}
	// Different seeds pick different validation sets.
	_, v1 := Split(100, 0.2, 1)
	_, v2 := Split(100, 0.2, 2)
	if slices.Equal(v1, v2) {
		t.Errorf("seeds 1 and 2 give the same validation set %v", v1)
	}
	// The split is random, not the first or last samples.
	if _, v := Split(100, 0.2, 1); v[len(v)-1]-v[0] < 50 {
		t.Errorf("validation set %v is clustered", v)
	}
}

func TestShuffle(t *testing.T) {
	train, _ := Split(50, 0.2, 8)
	tests := []struct {
		name    string
		indices []int
	}{
		{"split", train},
		{"range", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"one", []int{5}},
		{"empty", []int{}},
		{"nil", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := slices.Clone(tt.indices)
			a := Shuffle(tt.indices, 42, 0)
			if !slices.Equal(tt.indices, orig) {
				t.Fatal("Shuffle modified its input")
			}
			if a == nil {
				t.Fatal("nil result")
			}
			if !slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(orig))) {
				t.Fatalf("%v is not a permutation of %v", a, orig)
			}
			if b := Shuffle(tt.indices, 42, 0); !slices.Equal(a, b) {
				t.Fatalf("not deterministic: %v then %v", a, b)
			}
			if len(orig) < 10 {
				return
			}
			if b := Shuffle(tt.indices, 42, 1); slices.Equal(a, b) {
				t.Errorf("epochs 0 and 1 give the same order")
			}
			if b := Shuffle(tt.indices, 43, 0); slices.Equal(a, b) {
				t.Errorf("seeds 42 and 43 give the same order")
			}
			if slices.Equal(a, orig) {
				t.Errorf("order unchanged")
			}
		})
	}
}

// failing wraps a dataset and fails on chosen indices.
type failing struct {
	Dataset
	bad map[int]bool
}

func (f failing) Sample(i int, img []float32, mask []uint8) error {
	if f.bad[i] {
		return errors.New("broken sample")
	}
	return f.Dataset.Sample(i, img, mask)
}

func TestFillBatch(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 40, Size: 32, Seed: 5})
	c, px := 3*32*32, 32*32
	tests := []struct {
		name    string
		indices []int
	}{
		{"one", []int{7}},
		{"four", []int{3, 1, 4, 1}}, // repeats allowed
		{"many", Shuffle([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39}, 1, 2)},
		{"empty", []int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := len(tt.indices)
			images := make([]float32, n*c)
			masks := make([]uint8, n*px)
			for k := range images {
				images[k] = float32(math.NaN()) // every value must be written
			}
			if err := FillBatch(s, tt.indices, images, masks); err != nil {
				t.Fatal(err)
			}
			for b, i := range tt.indices {
				img, mask := sample(t, s, i)
				if !equalSample(images[b*c:(b+1)*c], masks[b*px:(b+1)*px], img, mask) {
					t.Fatalf("batch position %d (sample %d) differs from Sample", b, i)
				}
			}
		})
	}

	t.Run("buffer sizes", func(t *testing.T) {
		idx := []int{0, 1}
		if err := FillBatch(s, idx, make([]float32, 2*c-1), make([]uint8, 2*px)); err == nil || !strings.Contains(err.Error(), "images buffer") {
			t.Errorf("short images: %v", err)
		}
		if err := FillBatch(s, idx, make([]float32, 2*c), make([]uint8, 2*px+1)); err == nil || !strings.Contains(err.Error(), "masks buffer") {
			t.Errorf("long masks: %v", err)
		}
	})
	t.Run("sample errors", func(t *testing.T) {
		f := failing{s, map[int]bool{9: true, 4: true}}
		idx := []int{0, 1, 2, 3, 9, 5, 6, 4, 8}
		for range 20 { // the reported position must not depend on scheduling
			err := FillBatch(f, idx, make([]float32, len(idx)*c), make([]uint8, len(idx)*px))
			if err == nil || !strings.Contains(err.Error(), "batch position 4:") || !strings.Contains(err.Error(), "broken sample") {
				t.Fatalf("got %v, want the error of batch position 4", err)
			}
		}
		err := FillBatch(s, []int{0, 40}, make([]float32, 2*c), make([]uint8, 2*px))
		if err == nil || !strings.Contains(err.Error(), "batch position 1") || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("out-of-range index: %v", err)
		}
	})
}

func BenchmarkFillBatch(b *testing.B) {
	s := mustSynthetic(b, SyntheticConfig{})
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	images := make([]float32, len(idx)*3*64*64)
	masks := make([]uint8, len(idx)*64*64)
	for b.Loop() {
		if err := FillBatch(s, idx, images, masks); err != nil {
			b.Fatal(err)
		}
	}
}
