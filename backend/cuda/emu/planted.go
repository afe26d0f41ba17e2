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
)

var plantedNames = [...]string{"missing_barrier", "read_past_view", "blocks_write_one_word", "relu_write_past_end"}

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
