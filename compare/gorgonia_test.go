package compare

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
)

// TestRunGorgonia: the reference run trains the steps asked, reports each,
// and writes a summary.json that compare reads back; data other than the
// synthetic set is refused by name.
func TestRunGorgonia(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth = 4, 2
	cfg.Data.Size, cfg.Data.Count = 16, 24
	cfg.Train.BatchSize, cfg.Train.Accumulate = 2, 1
	dir := filepath.Join(t.TempDir(), "gorgonia")
	var losses []float64
	err := RunGorgonia(cfg, 2, dir, func(step int, loss, ms float64) {
		if step != len(losses)+1 || ms < 0 {
			t.Errorf("onStep(%d, %v, %v) after %d steps", step, loss, ms, len(losses))
		}
		losses = append(losses, loss)
	})
	if err != nil {
		t.Fatal(err)
	}
	var sum GorgoniaSummary
	if err := readJSON(filepath.Join(dir, "summary.json"), &sum); err != nil {
		t.Fatal(err)
	}
	if len(losses) != 2 || sum.Steps != 2 || sum.FinalLoss != losses[1] || math.IsNaN(sum.FinalLoss) || sum.FinalLoss <= 0 {
		t.Fatalf("losses %v, summary %+v", losses, sum)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	var keys map[string]any
	if err := json.Unmarshal(raw, &keys); err != nil || keys["step_ms_median"] == nil || keys["peak_rss_bytes"] == nil {
		t.Errorf("summary.json %s: %v", raw, err)
	}

	cfg.Data.Source = "folder"
	err = RunGorgonia(cfg, 1, t.TempDir(), func(int, float64, float64) { t.Error("a step ran on folder data") })
	if err == nil || !strings.Contains(err.Error(), `data.source is "folder"`) {
		t.Errorf("folder data: %v; want a refusal naming data.source", err)
	}
}
