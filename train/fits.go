package train

import (
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/memory"
)

// FitError refuses a run before it starts because the plan says it cannot
// fit: under memory.capacity, or in the memory this process may use.
type FitError struct {
	Need, Limit int64
	// Capacity says the limit is memory.capacity (else the host's memory).
	Capacity bool
	// AboveHost says the need is memory.capacity itself, above the host's
	// available memory (Limit) on a backend whose memory is the host's.
	AboveHost bool
	// Source says what sets a host limit (memlimit.Limit.Source).
	Source string
	// Detail says what the need is made of; Advice what would fit.
	Detail, Advice string
}

func (e *FitError) Error() string {
	need, limit := memory.FormatBytes(e.Need), memory.FormatBytes(e.Limit)
	if need == limit {
		need, limit = fmt.Sprintf("%d bytes", e.Need), fmt.Sprintf("%d bytes", e.Limit)
	}
	if e.AboveHost {
		return fmt.Sprintf("memory.capacity %s is more than the %s of memory this process may use (%s): on the CPU the pool's buffers are host memory, so the run would be killed instead of stopping at the capacity; set memory.capacity to at most %s, or auto (the memory this process may use)",
			need, limit, e.Source, limit)
	}
	if e.Capacity {
		return fmt.Sprintf("the planned peak of this run, %s reserved, is above memory.capacity %s: it would run out of memory in its first step. %s",
			need, limit, e.Advice)
	}
	return fmt.Sprintf("this run needs about %s of memory (%s) and this process may use %s (%s): the kernel would kill it or Go would die of \"out of memory\". %s",
		need, e.Detail, limit, e.Source, e.Advice)
}

// HostNeed is what a run of the planned configuration takes from the
// host's memory: the pool's planned peak reserved bytes (what the CPU
// backend's allocator holds, mapped outside Go's heap); on Go's heap,
// which its collector lets grow to about twice what it holds live (GOGC
// 100), so counted twice: the batch buffers (the loader's queue and the
// trainer's staging), what the dataset holds while it fills them
// (row.DataBytes: decodes in flight, a volume cache; it does not grow with
// the samples, decoded as batches take them) and the tensor a checkpoint
// writes at a time (row.TensorBytes); and the program itself.
func HostNeed(row PlanRow) (total int64, detail string) {
	cfg := row.Config
	h, w := cfg.ImageSize()
	sample := int64(cfg.Model.InChannels*h*w*4 + h*w)
	batch := sample * int64(cfg.Train.BatchSize) * int64(data.DefaultPrefetch+2)
	total = row.PeakReservedBytes + 2*(batch+row.DataBytes+row.TensorBytes) + ProgramBytes
	detail = fmt.Sprintf("the pool's planned peak reserved %s; twice, for Go's collector, the batch buffers %s", memory.FormatBytes(row.PeakReservedBytes), memory.FormatBytes(batch))
	if row.DataBytes > 0 {
		detail += fmt.Sprintf(", the dataset's decodes and caches %s", memory.FormatBytes(row.DataBytes))
	}
	if row.TensorBytes > 0 {
		detail += fmt.Sprintf(", a checkpoint's largest tensor %s", memory.FormatBytes(row.TensorBytes))
	}
	return total, detail + fmt.Sprintf("; the program %s", memory.FormatBytes(ProgramBytes))
}

// ProgramBytes is what memunet takes of the host's memory beside what
// HostNeed counts apart: its code (about 20 MiB resident), Go's runtime
// and its heap's floor (17-20 MiB: a quickstart run peaks at 37 MiB), and
// a margin for validation's and the metrics' small buffers (a run of
// whole 512 px images peaked 0.5 MiB above the need without it).
const ProgramBytes = 48 << 20

// CheckFits refuses, with a *FitError naming the figures and the variant
// that would fit, a run the plan says cannot fit: with memory.capacity and
// memory.fit off, a planned peak above the capacity (memory.fit: auto picks
// a variant instead); and a need (HostNeed) above what this process may use
// (host; Bytes 0: unknown, no check) where the pool is host memory or no
// capacity bounds it. cfg is validated; b is the backend the run computes
// on.
//
// A capacity above host is refused first where the pool's memory is the
// host's (a backend that reports no device memory: the CPU): the pool
// would never reach it, and the kernel would kill the run instead.
func CheckFits(cfg config.Config, host memlimit.Limit, b backend.Backend) error {
	capacity, available := int64(cfg.Memory.Capacity), host.Bytes
	onHost := poolOnHost(b)
	if capacity > available && available > 0 && onHost {
		return &FitError{Need: capacity, Limit: available, AboveHost: true, Source: host.Source()}
	}
	checkHost := available > 0 && (capacity == 0 || onHost)
	if capacity > 0 && cfg.Memory.Fit == "auto" || capacity == 0 && !checkHost {
		return nil
	}
	row, err := PlanConfig(cfg)
	if err != nil {
		return err
	}
	if capacity > 0 && row.PeakReservedBytes > capacity {
		return &FitError{Need: row.PeakReservedBytes, Limit: capacity, Capacity: true, Advice: fitAdvice(cfg, capacity)}
	}
	if !checkHost {
		return nil
	}
	need, detail := HostNeed(row)
	if need <= available {
		return nil
	}
	return &FitError{Need: need, Limit: available, Source: host.Source(), Detail: detail, Advice: hostAdvice(cfg, available)}
}

// PoolOnHost says whether cfg's device keeps the pool in host memory: a
// backend that reports no device memory of its own (the CPU), or one that
// cannot be opened here (assumed the host's).
func PoolOnHost(cfg config.Config) bool {
	b, err := Target(cfg)
	return err != nil || poolOnHost(b)
}

// poolOnHost says whether b keeps its pool in host memory: it reports no
// device memory of its own (the CPU).
func poolOnHost(b backend.Backend) bool {
	_, device := b.(device.MemoryReporter)
	return !device
}

// hostAdvice names the fastest variant whose host need fits in available,
// or the smallest when none does.
func hostAdvice(cfg config.Config, available int64) string {
	rows, _, err := Plan(cfg, VariantNames(), 0)
	if err != nil {
		return "Run " + cfg.Invocation.Command("plan") + " to see what each variant needs."
	}
	var best, smallest *PlanRow
	var smallestNeed int64
	for i := range rows {
		r := &rows[i]
		if r.Error != "" {
			continue
		}
		need, _ := HostNeed(*r)
		if need <= available && (best == nil || r.RelativeTime < best.RelativeTime) {
			best = r
		}
		if smallest == nil || need < smallestNeed {
			smallest, smallestNeed = r, need
		}
	}
	switch {
	case best != nil:
		need, _ := HostNeed(*best)
		return fmt.Sprintf("The %s variant fits (%s, about %s); or lower train.batch_size, %s or model.base.",
			best.Name, describeChanges(cfg, best.Config), memory.FormatBytes(need), SizeKey(cfg))
	case smallest != nil:
		return fmt.Sprintf("No variant fits: the smallest, %s (%s), needs about %s; lower train.batch_size, %s or model.base.",
			smallest.Name, describeChanges(cfg, smallest.Config), memory.FormatBytes(smallestNeed), SizeKey(cfg))
	}
	return fmt.Sprintf("Lower train.batch_size, %s or model.base.", SizeKey(cfg))
}

// SizeKey is the key that sets the size cfg trains at: data.resize for
// images, data.patch for NIfTI volumes, data.size for synthetic volumes
// (volumes refuse data.resize).
func SizeKey(cfg config.Config) string {
	switch {
	case cfg.Model.Volumes() && cfg.Data.Source == data.SourceSynthetic:
		return "data.size"
	case cfg.Model.Volumes():
		return "data.patch"
	}
	return "data.resize"
}
