package device

import (
	"fmt"
	"runtime"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
)

// Open returns the backend spec names: auto is CUDA device 0 in a gpu build
// (when the driver finds one) and the CPU otherwise.
func Open(spec Spec) (backend.Backend, error) {
	switch spec.Kind {
	case CPU:
		return cpu.New(), nil
	case CUDA:
		return openCUDA(spec.Index)
	}
	if b, err := openCUDA(0); err == nil {
		return b, nil
	}
	return cpu.New(), nil
}

// Describer is a backend that can say what it runs on for the start banner:
// the device's name, memory and driver.
type Describer interface {
	Describe() string
}

// Describe says what b runs on: its own description (and, for the CUDA
// backend, who computes its convolutions: ResolveConv), or for the CPU
// the cores Go uses.
func Describe(b backend.Backend) string {
	if d, ok := b.(Describer); ok {
		if r, ok := b.(ConvResolver); ok && r.ConvProvider().Describe() != "" {
			return d.Describe() + "; " + r.ConvProvider().Describe()
		}
		return d.Describe()
	}
	if b.Name() == "cpu" {
		return fmt.Sprintf("cpu (%d threads)", runtime.GOMAXPROCS(0))
	}
	return b.Name()
}

// LaunchSyncer is a backend that can wait for the device after every
// kernel launch, so that a fault names the kernel that caused it (the CUDA
// backend: config key cuda.sync_launches).
type LaunchSyncer interface {
	SetSyncLaunches(on bool)
}

// TF32Setter is a backend that can run fp32 convolutions on tensor cores
// with TF32 operands or exactly (the CUDA backend: config key cuda.tf32).
type TF32Setter interface {
	SetTF32(on bool)
}

// WorkCounter is a backend that counts what the host asks of its device
// (the CUDA backend) since it was made.
type WorkCounter interface {
	Counts() backend.WorkCounts
}

// LoopWaiter is a backend whose work runs in parallel loops on the host's
// cores (the CPU backend): LoopWait is how long, since it was made, the
// calling thread has waited at the loops' ends for the other cores.
type LoopWaiter interface {
	LoopWait() time.Duration
}

// MemoryReporter is a backend that reports its device's memory as the
// device itself sees it (the CUDA backend: cuMemGetInfo, what nvidia-smi
// shows), beside what its pool accounts.
type MemoryReporter interface {
	// DeviceMemory is the memory in use on the device (by every process)
	// and the device's total.
	DeviceMemory() (used, total int64, err error)
	// ContextOverhead is what was in use once the backend was opened,
	// before any pool allocation: the context, kernels and scratch.
	ContextOverhead() int64
}
