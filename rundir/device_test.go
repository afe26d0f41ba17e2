package rundir

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
)

// reportingCPU is the CPU backend that also reports device memory, as the
// CUDA backend does: a context overhead of 1 MiB and a count that grows
// with every query.
type reportingCPU struct {
	cpu.CPU
	calls *atomic.Int64
}

func (r reportingCPU) DeviceMemory() (used, total int64, err error) {
	return 1<<20 + 4096*r.calls.Add(1), 8 << 30, nil
}
func (r reportingCPU) ContextOverhead() int64 { return 1 << 20 }

// TestDeviceMemoryRecorded: with a backend that reports its device's own
// memory, every step record, its phases and summary.json carry it; on the
// CPU the fields are absent.
func TestDeviceMemoryRecorded(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps = 3
	dir := t.TempDir()
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: dir, backend: reportingCPU{calls: new(atomic.Int64)}}, nil)
	if sum.ContextOverheadBytes != 1<<20 || sum.DeviceTotalBytes != 8<<30 || sum.DeviceUsedPeakBytes <= 1<<20 {
		t.Errorf("summary: overhead %d, total %d, used peak %d", sum.ContextOverheadBytes, sum.DeviceTotalBytes, sum.DeviceUsedPeakBytes)
	}
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	steps := 0
	for dec.More() {
		var rec StepRecord
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		if rec.Type != "step" {
			continue
		}
		steps++
		if rec.DeviceUsedBytes <= 1<<20 || rec.DeviceUsedBytes > sum.DeviceUsedPeakBytes {
			t.Errorf("step %d: device_used_bytes %d", rec.Step, rec.DeviceUsedBytes)
		}
		for name, ph := range rec.Phases {
			if ph.DeviceUsedBytes <= 1<<20 {
				t.Errorf("step %d, %s: device_used_bytes %d", rec.Step, name, ph.DeviceUsedBytes)
			}
		}
	}
	if steps != 3 {
		t.Errorf("%d step records", steps)
	}

	plain := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: plain}, nil)
	for _, name := range []string{"summary.json", "metrics.jsonl"} {
		b, _ := os.ReadFile(filepath.Join(plain, name))
		if strings.Contains(string(b), "device_used") || strings.Contains(string(b), "context_overhead") {
			t.Errorf("%s of a CPU run reports device memory", name)
		}
	}
}
