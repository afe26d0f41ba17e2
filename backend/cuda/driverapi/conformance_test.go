//go:build gpu

package driverapi_test

import (
	"errors"
	"testing"

	"github.com/memunet/memunet/backend/backendtest"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/driverapi"
)

// device0 is CUDA device 0's backend; the test skips where the driver
// cannot start (no GPU): the device check counts a skip as no result.
func device0(t *testing.T) *cuda.Backend {
	t.Helper()
	b, err := driverapi.Open(0)
	if errors.Is(err, driverapi.ErrNoDriver) {
		t.Skipf("no GPU here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs the backend conformance suite on CUDA device 0:
// every operation against the float64 references, with the suite's
// tolerances, odd sizes, guarded sub-views and NaN-prefilled outputs.
func TestConformance(t *testing.T) {
	b := device0(t)
	t.Log(b.Describe())
	backendtest.Run(t, b)
}
