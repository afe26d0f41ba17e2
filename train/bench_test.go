package train

import (
	"math"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
)

// TestBench: a benchmark row has a positive median step and rate, and the
// per-kind, optimizer and other times are what the steps took (never
// negative); a variant that cannot be built is an error.
func TestBench(t *testing.T) {
	cfg := tinyConfig()
	row, err := Bench(cfg, cpu.New(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if row.Variant != cfg.Variant().Columns()[0] || !(row.StepMS > 0) || !(row.GFLOPs > 0) || math.IsInf(row.GFLOPs, 0) {
		t.Fatalf("row %+v", row)
	}
	sum := row.OptimizerMS + row.OtherMS
	for k, ms := range row.KindMS {
		if ms < 0 {
			t.Errorf("kind %d: %v ms", k, ms)
		}
		sum += ms
	}
	if row.OptimizerMS < 0 || sum <= 0 {
		t.Errorf("optimizer %v ms, all parts %v ms: the steps' time is not accounted for", row.OptimizerMS, sum)
	}
	cfg.Model.Classes = 0
	if _, err := Bench(cfg, cpu.New(), 1); err == nil {
		t.Error("a model of 0 classes: no error")
	}
}
