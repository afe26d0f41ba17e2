//go:build cudaemu

package emu_test

import (
	"testing"

	"github.com/memunet/memunet/backend/backendtest"
	"github.com/memunet/memunet/backend/cuda/emu"
)

// TestConformance runs the backend conformance suite on the CUDA backend
// with its kernels emulated on the host.
func TestConformance(t *testing.T) {
	b, err := emu.Backend(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, b)
}
