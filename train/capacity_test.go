package train

import (
	"strings"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
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
	if avail := HostMemory(); avail > 0 && (int64(got.Memory.Capacity) != avail || !strings.Contains(note, "the host's available memory")) {
		t.Errorf("the CPU: %d (available %d), %q", got.Memory.Capacity, avail, note)
	}
	cfg.Memory.Capacity = 6 << 30
	if got, note := ResolveCapacity(cfg, smallGPU{}); got.Memory.Capacity != 6<<30 || note != "" {
		t.Errorf("a fixed capacity changed: %d, %q", got.Memory.Capacity, note)
	}
	// A trainer resolves it too: its pool has the device's free memory as capacity.
	cfg.Memory.Capacity = config.CapacityAuto
	tr, err := NewTrainerOn(cfg, smallGPU{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Config.Memory.Capacity != 924<<20 {
		t.Errorf("trainer capacity %d", tr.Config.Memory.Capacity)
	}
}
