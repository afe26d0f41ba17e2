package train

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memlimit"
)

// smallGPU is the CPU backend reporting a device of 1 GiB with 100 MiB in use.
type smallGPU struct{ cpu.CPU }

func (smallGPU) DeviceMemory() (used, total int64, err error) { return 100 << 20, 1 << 30, nil }
func (smallGPU) ContextOverhead() int64                       { return 100 << 20 }

func TestResolveCapacity(t *testing.T) {
	cfg := tinyConfig()
	cfg.Memory.Capacity = config.CapacityAuto
	got, note := ResolveCapacity(cfg, smallGPU{})
	if got.Memory.Capacity != 924<<20 || !strings.Contains(note, "924.00 MiB, the free memory of cpu") {
		t.Errorf("a reporting device: %d, %q", got.Memory.Capacity, note)
	}
	got, note = ResolveCapacity(cfg, cpu.New())
	// MemAvailable moves between two reads: the two agree within 5%.
	if avail := memlimit.Read().Budget(); avail > 0 && (math.Abs(float64(got.Memory.Capacity)/float64(avail)-1) > 0.05 || !strings.Contains(note, "3/4 of the memory this process may use")) {
		t.Errorf("the CPU: %d (available %d), %q", got.Memory.Capacity, avail, note)
	}
	cfg.Memory.Capacity = 6 << 30
	if got, note := ResolveCapacity(cfg, smallGPU{}); got.Memory.Capacity != 6<<30 || note != "" {
		t.Errorf("a fixed capacity changed: %d, %q", got.Memory.Capacity, note)
	}
	// A trainer resolves it too: its pool has the device's free memory as capacity.
	cfg.Memory.Capacity = config.CapacityAuto
	tr, err := NewTrainer(cfg, Placement{Backend: smallGPU{}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Config.Memory.Capacity != 924<<20 {
		t.Errorf("trainer capacity %d", tr.Config.Memory.Capacity)
	}
}

// TestCapacityAboveHostRefused: on the CPU the pool is host memory, so a
// memory.capacity above what the host has available would never stop the
// run before Go's runtime did; it is refused with both figures. Below it,
// the capacity is planned against as before.
func TestCapacityAboveHostRefused(t *testing.T) {
	cfg := planGridConfig(16, 4, "bilinear", "batch")
	cfg.Memory.Capacity = 1 << 40
	err := CheckFits(cfg, memlimit.Given(1<<30, "in the test"), cpu.New())
	var fe *FitError
	if !errors.As(err, &fe) || !fe.AboveHost || !strings.Contains(err.Error(), "memory.capacity 1.00 TiB") ||
		!strings.Contains(err.Error(), "1.00 GiB of memory this process may use (1.00 GiB in the test)") {
		t.Fatalf("capacity 1 TiB on a 1 GiB host: %v", err)
	}
	cfg.Memory.Capacity = 512 << 20
	if err := CheckFits(cfg, memlimit.Given(1<<30, "in the test"), cpu.New()); err != nil {
		t.Errorf("capacity 512 MiB on a 1 GiB host: %v", err)
	}
	cfg.Memory.Capacity = 1 << 40
	if err := CheckFits(cfg, memlimit.Given(0, "in the test"), cpu.New()); err != nil {
		t.Errorf("capacity 1 TiB where the host's memory is unknown: %v", err)
	}
}
