package model

import (
	"strings"
	"testing"
)

// TestArchPoolKernels: model.pool_kernels that do not fit the model are
// refused naming the key and what to set.
func TestArchPoolKernels(t *testing.T) {
	k := [3]int{2, 2, 2}
	for _, tc := range []struct {
		name string
		arch Arch
		want string
	}{
		{"2D model", Arch{Depth: 2, PoolKernels: [][3]int{k, k}}, "model.pool_kernels: [[2 2 2] [2 2 2]]: model.dims is 2 (images), which pool 2x2 at every level; leave model.pool_kernels out, or set model.dims: 3"},
		{"too few", Arch{Dims: 3, Depth: 2, PoolKernels: [][3]int{k}}, "model.pool_kernels: 1 kernels: a 3D UNet takes one per level below the first (model.depth = 2)"},
		{"zero", Arch{Dims: 3, Depth: 1, PoolKernels: [][3]int{{0, 2, 2}}}, "each kernel is [1 or 2, 2, 2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Config{Arch: tc.arch}.WithDefaults().Arch
			a.Depth = tc.arch.Depth
			if err := a.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	ok := Config{Arch: Arch{Dims: 3, Depth: 2, PoolKernels: [][3]int{{1, 2, 2}, k}}}.WithDefaults().Arch
	if err := ok.Validate(); err != nil {
		t.Errorf("valid pool_kernels: %v", err)
	}
}
