package train

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/memory"
)

// ResolveCapacity turns memory.capacity: auto into bytes for backend b: the
// device's free memory now where b reports its device's memory (a GPU: what
// other processes and the context hold is not the run's), else memlimit's
// share for automatic choices of the memory this process may use (the
// least of MemAvailable, its cgroups and its rlimits), else 0 (unlimited). note says what was chosen and why ("" when the
// capacity was not auto).
func ResolveCapacity(cfg config.Config, b backend.Backend) (resolved config.Config, note string) {
	if cfg.Memory.Capacity != config.CapacityAuto {
		return cfg, ""
	}
	if r, ok := b.(device.MemoryReporter); ok {
		if used, total, err := r.DeviceMemory(); err == nil {
			cfg.Memory.Capacity = config.ByteSize(total - used)
			return cfg, fmt.Sprintf("memory.capacity: auto: %s, the free memory of %s (%s of %s in use)",
				memory.FormatBytes(total-used), b.Name(), memory.FormatBytes(used), memory.FormatBytes(total))
		}
	}
	if host := memlimit.Read(); host.Bytes > 0 {
		// The pool is host memory here, and not all of it: the batches
		// beside it and the runtime take the rest.
		cfg.Memory.Capacity = config.ByteSize(host.Budget())
		return cfg, fmt.Sprintf("memory.capacity: auto: %s, %s (%s)", memory.FormatBytes(host.Budget()), memlimit.MarginText, host.Short())
	}
	cfg.Memory.Capacity = 0
	return cfg, "memory.capacity: auto: unlimited (the memory this process may use is unknown)"
}

// AutoCapacity is memory.capacity: auto in bytes for cfg's device (Target,
// then ResolveCapacity), with the note saying what it is.
func AutoCapacity(cfg config.Config) (int64, string, error) {
	b, err := Target(cfg)
	if err != nil {
		return 0, "", err
	}
	cfg.Memory.Capacity = config.CapacityAuto
	cfg, note := ResolveCapacity(cfg, b)
	return int64(cfg.Memory.Capacity), note, nil
}
