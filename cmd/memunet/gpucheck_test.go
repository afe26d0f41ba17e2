package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/memunet/memunet/report"
)

// TestGPUCheckScriptSmoke runs tools/gpu-check.sh in its smoke mode (the CPU
// build, device cpu, 32x32) to check its plumbing: every step runs and
// gpu-check.json is valid JSON with the seven variants compared and both
// training summaries. The GPU run itself is for the device.
func TestGPUCheckScriptSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := filepath.Join(t.TempDir(), "memunet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "tools/gpu-check.sh", "run", out)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "SMOKE=1", "DEVICE=cpu", "MEMUNET="+bin, "SIZES=32", "STEPS=2", "TRAIN_STEPS=4")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpu-check.sh: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(out, "gpu-check.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Device  string                         `json:"device"`
		Compare map[string][]report.CompareRow `json:"compare"`
		Train   map[string]*struct {
			FinalLoss float64 `json:"final_loss"`
			Steps     int     `json:"steps"`
		} `json:"train"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("gpu-check.json: %v\n%s", err, raw)
	}
	rows := got.Compare["32"]
	if len(rows) != 7 {
		t.Fatalf("compare at 32: %d rows", len(rows))
	}
	for _, r := range rows {
		if r.Error != "" || r.PeakAllocatedBytes == 0 {
			t.Errorf("compare %s: %+v", r.Name, r)
		}
	}
	if tr := got.Train["cpu"]; tr == nil || tr.Steps != 4 || tr.FinalLoss == 0 {
		t.Errorf("train summary: %+v", tr)
	}
}
