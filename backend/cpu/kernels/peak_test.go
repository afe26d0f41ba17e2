package kernels

import (
	"testing"
	"time"
)

// TestMicroKernelPeak: the measured peak is a positive, finite rate (its
// size depends on the machine, so only its sanity is asserted).
func TestMicroKernelPeak(t *testing.T) {
	p := MicroKernelPeak(20 * time.Millisecond)
	if !(p > 0) || p > 1e6 {
		t.Fatalf("MicroKernelPeak = %v GFLOP/s", p)
	}
	t.Logf("%s micro-kernel: %.1f GFLOP/s on this machine", GemmImplementation(), p)
}
