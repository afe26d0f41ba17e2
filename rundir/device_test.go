package rundir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/train"
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

// fullGPU reports a device with only 64 KiB free.
type fullGPU struct{ cpu.CPU }

func (fullGPU) DeviceMemory() (used, total int64, err error) { return 8<<30 - 64<<10, 8 << 30, nil }
func (fullGPU) ContextOverhead() int64                       { return 1 << 20 }

// TestCapacityAutoIsTheDevicesFreeMemory: memory.capacity: auto on a device
// with too little free memory refuses the run before it starts, with the
// plan's figures; with room, the run says what auto chose.
func TestCapacityAutoIsTheDevicesFreeMemory(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Memory.Capacity = config.CapacityAuto
	_, err := Run(context.Background(), cfg, Options{OutDir: t.TempDir(), backend: fullGPU{}})
	var fe *train.FitError
	if !errors.As(err, &fe) || !fe.Capacity || fe.Limit != 64<<10 {
		t.Fatalf("a full device: %v", err)
	}
	var log bytes.Buffer
	cfg.Output.Progress = "plain"
	mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir(), backend: reportingCPU{calls: new(atomic.Int64)}, Progress: &log}, nil)
	if !strings.Contains(log.String(), "memory.capacity: auto: ") || !strings.Contains(log.String(), "the free memory of cpu") {
		t.Errorf("log: %s", log.String())
	}
}
