//go:build cudaemu

package emu

import "github.com/memunet/memunet/backend/cuda"

// Planted is a kernel with a bug the sanitizer must find (planted.cpp), for
// tests.
type Planted int

const (
	// MissingBarrier (out, in): each thread passes in[t] to its neighbour
	// through shared memory without __syncthreads.
	MissingBarrier Planted = iota
	// ReadPastView (out, in, n): out[i] = in[i+1], one value past in.
	ReadPastView
	// BlocksWriteOneWord (out): thread 0 of every block writes out[0].
	BlocksWriteOneWord
	// ReLUWritePastEnd takes relu's arguments and writes each result one
	// place on, the last past out's end.
	ReLUWritePastEnd
	// SwappedFragment is a tensor-core kernel (tc.cu) that multiplies
	// each A fragment by its neighbour's B fragment.
	SwappedFragment
	// SkippedSlice is a tensor-core kernel that leaves out its second
	// k-slice.
	SkippedSlice
	// EarlyStage is a tensor-core kernel whose pipeline runs a stage
	// ahead: the TF32 path multiplies a slice before its cp.async copies
	// are waited for, the 16-bit path fills the buffer the warps are
	// multiplying.
	EarlyStage
)

var plantedNames = [...]string{"missing_barrier", "read_past_view", "blocks_write_one_word", "relu_write_past_end",
	"swapped_fragment", "skipped_slice", "early_stage"}

// tensorCore reports a bug planted in tc.cu's kernels, which runs in place
// of one of them only.
func (p Planted) tensorCore() bool { return p >= SwappedFragment }

func (p Planted) String() string { return plantedNames[p] }

// LaunchPlanted runs planted kernel p on gx*gy blocks as a checked launch
// (extents as for LaunchChecked); what it finds is the device's fault.
func (d *Device) LaunchPlanted(p Planted, gx, gy int, args []uint64, extents []cuda.Extent) error {
	return d.run(plantedModule, int(p), p.String(), gx, gy, args, extents)
}

// Substitute makes every later launch of kernel k run p instead, with k's
// arguments: a fault planted in the backend's own path.
func (d *Device) Substitute(k cuda.Kernel, p Planted) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.planted[k] = p
}
