package cuda

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"unicode"

	"github.com/memunet/memunet/backend"
)

// ringSize is how many of the latest launches the backend keeps to report
// with a fault.
const ringSize = 16

// SyncLaunchesEnv set to 1 makes every backend made in the process wait
// after each launch (see SetSyncLaunches); config key cuda.sync_launches
// does the same for a run.
const SyncLaunchesEnv = "MEMUNET_CUDA_SYNC"

// launchRecord is one kernel launch as the backend issued it.
type launchRecord struct {
	kernel Kernel
	gx, gy int
	args   []any
	caller [6]uintptr // the stack that issued it, resolved only for a report
}

// op is the backend operation that issued the launch: the first exported
// method of *Backend on the stack that issued it.
func (r *launchRecord) op() string {
	frames := runtime.CallersFrames(r.caller[:])
	for {
		f, more := frames.Next()
		if _, m, ok := strings.Cut(f.Function, ".(*Backend)."); ok && m != "" && unicode.IsUpper(rune(m[0])) {
			return m
		}
		if !more {
			return "an operation"
		}
	}
}

// String is the launch as a fault's report lists it: kernel, operation,
// grid and arguments (pointers in hex, floats as floats).
func (r *launchRecord) String() string {
	args := make([]string, len(r.args))
	for i, a := range r.args {
		switch v := a.(type) {
		case devicePtr:
			args[i] = fmt.Sprintf("%#x", v.addr)
		case float32, float64:
			args[i] = fmt.Sprintf("%g", v)
		default:
			args[i] = fmt.Sprint(v)
		}
	}
	return fmt.Sprintf("%s (%s, grid %dx%d, args %s)", r.kernel, r.op(), r.gx, r.gy, strings.Join(args, " "))
}

// launchRing keeps the latest launches and which of them the device is
// known to have finished (a sync or a blocking copy after them succeeded).
type launchRing struct {
	recs     [ringSize]launchRecord
	issued   int // launches so far
	finished int // launches the device has finished
}

func (r *launchRing) add(rec launchRecord) *launchRecord {
	p := &r.recs[r.issued%ringSize]
	*p = rec
	r.issued++
	return p
}

// pending lists the launches the device may not have finished, newest
// first, at most ringSize of them, and how many more there were.
func (r *launchRing) pending() (recent []string, more int) {
	n := r.issued - r.finished
	for i := 0; i < min(n, ringSize); i++ {
		recent = append(recent, r.recs[(r.issued-1-i)%ringSize].String())
	}
	return recent, max(0, n-ringSize)
}

// FaultError is the first error a device reported, which every later
// operation and Sync returns (a CUDA context is unusable after a kernel
// fault): the device, the operation that saw it and the driver's error,
// and either the kernel that failed (when known: with sync launches, each
// launch is waited for) or every launch the device had not yet finished
// then, newest first, any of which may have caused it.
type FaultError struct {
	Device string
	Op     string // the operation or call that saw the error
	// Kernel is the launch that failed, as a report lists it ("relu (ReLU,
	// grid 1x1, args ...)"), when it is known; else "".
	Kernel string
	// Pending are the launches not known to have finished when the error
	// was seen, newest first (at most 16; Unlisted more).
	Pending  []string
	Unlisted int
	Err      error
}

func (e *FaultError) Error() string {
	if e.Kernel != "" {
		return fmt.Sprintf("%s: kernel %s failed: %v", e.Device, e.Kernel, e.Err)
	}
	msg := fmt.Sprintf("%s: %s: %v", e.Device, e.Op, e.Err)
	if len(e.Pending) == 0 {
		return msg
	}
	more := ""
	if e.Unlisted > 0 {
		more = fmt.Sprintf(" and %d earlier", e.Unlisted)
	}
	return fmt.Sprintf("%s; the device had not finished these launches, newest first, one of which may have failed: %s%s "+
		"(cuda.sync_launches: true or %s=1 waits after each launch to name the kernel that fails)",
		msg, strings.Join(e.Pending, "; "), more, SyncLaunchesEnv)
}

func (e *FaultError) Unwrap() error { return e.Err }

// devicePtr is a device address with the bytes of the view or scratch area
// it points into: launch arguments carry it so that a driver which checks
// accesses (the emulator) knows each pointer's extent.
type devicePtr struct {
	addr  uintptr
	bytes int64
}

// Extent is the device memory a pointer argument of a launch points into:
// [Addr, Addr+Bytes).
type Extent struct {
	Addr  uintptr
	Bytes int64
}

// CheckedLauncher is a Driver that checks every access a kernel makes
// through a pointer argument against that argument's extent (the
// emulator): the backend launches through it where a driver has it.
type CheckedLauncher interface {
	// LaunchChecked is Launch with extents[i] the extent of args[i] where
	// it is a pointer (Bytes 0 for other arguments).
	LaunchChecked(k Kernel, gx, gy int, args []uint64, extents []Extent) error
}

// pointers are the device pointers among a launch's arguments.
func pointers(args []any) []devicePtr {
	var ps []devicePtr
	for _, a := range args {
		if p, ok := a.(devicePtr); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// launchArgs is each argument as 64 bits (pointers and integers as int64,
// floats as float64: exact for float32 values) and each pointer argument's
// extent.
func launchArgs(k Kernel, args []any) ([]uint64, []Extent) {
	vals := make([]uint64, len(args))
	extents := make([]Extent, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case devicePtr:
			vals[i] = uint64(v.addr)
			extents[i] = Extent{Addr: v.addr, Bytes: v.bytes}
		case int:
			vals[i] = uint64(int64(v))
		case backend.DType:
			vals[i] = uint64(v)
		case bool:
			if v {
				vals[i] = 1
			}
		case float32:
			vals[i] = math.Float64bits(float64(v))
		case float64:
			vals[i] = math.Float64bits(v)
		default:
			panic(fmt.Sprintf("backend/cuda: kernel %s: argument %d of type %T", k, i, a))
		}
	}
	return vals, extents
}
