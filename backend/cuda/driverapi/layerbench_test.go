//go:build gpu

package driverapi_test

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
)

// TestLayerBench times every convolution of the seed UNet (base 16 and 64,
// 128 and 512 px, batch 4), forward and both gradients, in TF32, fp16,
// bf16 and exact fp32, on device 0's events, and writes the rows as JSON
// to the file MEMUNET_LAYER_BENCH names (tools/check/gpu-check.sh's layers
// step); it skips without it. MEMUNET_LAYER_BENCH_S (default 40) bounds
// its time: what was measured by then is written.
func TestLayerBench(t *testing.T) {
	out := os.Getenv("MEMUNET_LAYER_BENCH")
	if out == "" {
		t.Skip("set MEMUNET_LAYER_BENCH=FILE to run the per-layer benchmark")
	}
	secs, err := strconv.Atoi(os.Getenv("MEMUNET_LAYER_BENCH_S"))
	if err != nil || secs <= 0 {
		secs = 40
	}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	b := device0(t)
	rows := []cuda.LayerTime{}
	// The 16- and TF32 tensor-core paths first, at every size, then exact
	// fp32 (the slowest) while time is left.
	for _, precisions := range [][]string{{"tf32", "fp16", "bf16"}, {"fp32"}} {
		for _, c := range []struct{ base, size int }{{16, 128}, {16, 512}, {64, 128}, {64, 512}} {
			got, err := cuda.BenchLayers(b, [2]int{c.base, c.size}, backend.SeedUNetConvolutions(c.base, c.size, 4), precisions, 3, deadline)
			rows = append(rows, got...)
			if err != nil {
				t.Error(err)
				break
			}
		}
	}
	data, _ := json.MarshalIndent(rows, "", " ")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows in %s", len(rows), out)
}
