package train

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
)

var updatePlanGolden = flag.Bool("update-plan-golden", false, "rewrite testdata/plan/grid.json from the current plan")

// planGoldenCases is the plan-vs-measured grid (TestPlanMatchesMeasuredPeak)
// plus the README's seed UNet (base 16, depth 4, batch 4, 128x128).
func planGoldenCases() []struct {
	Name   string
	Config config.Config
} {
	var out []struct {
		Name   string
		Config config.Config
	}
	add := func(name string, c config.Config) {
		out = append(out, struct {
			Name   string
			Config config.Config
		}{name, c})
	}
	for _, size := range []int{16, 24, 32} {
		for _, batch := range []int{4, 8} {
			for _, up := range []string{"bilinear", "transpose"} {
				for _, norm := range []string{"batch", "group"} {
					add(fmt.Sprintf("%dpx/b%d/%s/%s", size, batch, up, norm), planGridConfig(size, batch, up, norm))
				}
			}
		}
	}
	seed := config.Default()
	seed.Model.Base, seed.Model.Depth, seed.Model.Classes = 16, 4, 2
	seed.Data.Size, seed.Data.Count = 128, 32
	seed.Train.BatchSize = 4
	seed.Output.Progress = "none"
	add("seed/base16/depth4/b4/128px", seed)
	none := planGridConfig(32, 4, "transpose", "none")
	none.Model.Checkpoint = config.Checkpoint{Levels: []int{0, 2}}
	none.Train.Precision = backend.BFloat16
	add("32px/b4/transpose/none/ck[0,2]/bf16", none)
	step := planGridConfig(24, 8, "bilinear", "batch")
	step.Memory.EmptyCache, step.Train.Accumulate = config.EmptyStep, 2
	step.Data.Count = 64
	add("24px/b8x2/bilinear/batch/empty_cache_step", step)
	return out
}

// TestPlanGolden holds every variant's plan (peak allocated and reserved
// bytes, the split by category and by phase, the estimated time) over the
// grid to testdata/plan/grid.json, byte for byte, at GOMAXPROCS 2 (the
// convolutions' workspace has one set of packing buffers per worker). The
// file was written before the device seam was introduced, so it shows that
// the seam changed no byte count; a change that means to move memory
// rewrites it with -update-plan-golden and says why.
func TestPlanGolden(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	type entry struct {
		Name string    `json:"name"`
		Rows []PlanRow `json:"rows"`
	}
	var got []entry
	for _, c := range planGoldenCases() {
		rows, _, err := Plan(c.Config, append([]string{"config"}, VariantNames()...), 0)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		got = append(got, entry{c.Name, rows})
	}
	out, err := json.MarshalIndent(got, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	path := filepath.Join("..", "testdata", "plan", "grid.json")
	if *updatePlanGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go test ./train -run TestPlanGolden -update-plan-golden)", err)
	}
	if bytes.Equal(out, want) {
		return
	}
	var wantEntries []entry
	if err := json.Unmarshal(want, &wantEntries); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	diffs := 0
	for i := range got {
		if i >= len(wantEntries) {
			t.Errorf("%s: not in %s", got[i].Name, path)
			continue
		}
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(wantEntries[i])
		if !bytes.Equal(g, w) && diffs < 5 {
			diffs++
			t.Errorf("%s: plan differs from %s:\ngot  %s\nwant %s", got[i].Name, path, g, w)
		}
	}
	if diffs == 0 {
		t.Errorf("plan output differs from %s (entry count %d, want %d)", path, len(got), len(wantEntries))
	}
}
