package cuda

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// errIllegalAddress stands for the driver's sticky fault.
var errIllegalAddress = errors.New("CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)")

// faultyDriver is a device without memory behind its addresses whose
// kernel faulty faults as a GPU's does: its launch succeeds, and every call
// after it (the next launch, a copy, a sync) returns the sticky error.
type faultyDriver struct {
	faulty Kernel
	next   uintptr
	sticky bool
	copies int // device-to-host copies made
}

func (d *faultyDriver) Name() string { return "cuda:test" }
func (d *faultyDriver) Alloc(bytes int64) (uintptr, error) {
	d.next += 1 << 20
	return d.next, nil
}
func (d *faultyDriver) Free(uintptr) error { return d.state() }
func (d *faultyDriver) AllocHost(int64) (unsafe.Pointer, error) {
	return nil, errors.New("no host memory")
}
func (d *faultyDriver) FreeHost(unsafe.Pointer) error          { return nil }
func (d *faultyDriver) MemsetD32(uintptr, uint32, int64) error { return d.state() }
func (d *faultyDriver) MemsetD16(uintptr, uint16, int64) error { return d.state() }
func (d *faultyDriver) CopyHtoD(uintptr, []byte) error         { return d.state() }
func (d *faultyDriver) CopyDtoD(uintptr, uintptr, int64) error { return d.state() }
func (d *faultyDriver) Sync() error                            { return d.state() }
func (d *faultyDriver) CopyToDeviceAsync(uintptr, unsafe.Pointer, int64) error {
	return d.state()
}
func (d *faultyDriver) CopyToHostAsync(unsafe.Pointer, uintptr, int64) error { return d.state() }
func (d *faultyDriver) Record(Stream) (Event, error)                         { return 1, d.state() }
func (d *faultyDriver) WaitEvent(Stream, Event) error                        { return d.state() }
func (d *faultyDriver) EventDone(Event) (bool, error)                        { return true, d.state() }
func (d *faultyDriver) EventSync(Event) error                                { return d.state() }
func (d *faultyDriver) EventTime(Event, Event) (time.Duration, error)        { return 0, d.state() }
func (d *faultyDriver) ReleaseEvent(Event) error                             { return nil }
func (d *faultyDriver) MemInfo() (free, total int64, err error)              { return 1 << 30, 1 << 30, nil }
func (d *faultyDriver) state() error {
	if d.sticky {
		return errIllegalAddress
	}
	return nil
}

func (d *faultyDriver) Launch(k Kernel, gx, gy int, args []uint64) error {
	if err := d.state(); err != nil {
		return err
	}
	d.sticky = k == d.faulty
	return nil
}

func (d *faultyDriver) CopyDtoH(dst []byte, src uintptr) error {
	if err := d.state(); err != nil {
		return err
	}
	d.copies++
	for i := range dst {
		dst[i] = 0x3f
	}
	return nil
}

// faultEnv is a backend over a faultyDriver whose relu kernel faults, and
// four float32 views of n values on it.
func faultEnv(t *testing.T, n int) (*Backend, *faultyDriver, []backend.View) {
	t.Helper()
	drv := &faultyDriver{faulty: KReLU}
	b, err := New(drv)
	if err != nil {
		t.Fatal(err)
	}
	pool := memory.NewPool(b.Allocator(), memory.Options{})
	var views []backend.View
	for range 4 {
		buf, err := pool.Alloc(memory.Activations, int64(4*n))
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, backend.View{Buf: buf, DT: backend.Float32, Len: n})
	}
	return b, drv, views
}

// TestFaultNamesPendingLaunches: a kernel fault seen by a later operation
// is reported with that operation and every launch the device had not
// finished, the faulting one among them, newest first; every later call
// returns the same error, downloads come back zeroed instead of
// panicking, and nothing more is issued.
func TestFaultNamesPendingLaunches(t *testing.T) {
	b, drv, v := faultEnv(t, 300)
	b.Add(v[0], v[1], v[2]) // finished: the download below waits for it
	backend.DownloadFloat32(b, v[0])
	b.ReLU(v[1], v[0]) // faults
	b.Add(v[2], v[1], v[0])
	err := b.Sync()
	var f *FaultError
	if !errors.As(err, &f) || !errors.Is(err, errIllegalAddress) {
		t.Fatalf("Sync after a fault: %v", err)
	}
	if f.Kernel != "" || f.Op != "add" || len(f.Pending) != 2 ||
		!strings.HasPrefix(f.Pending[0], "add (Add, grid 2x1, args 0x") || !strings.HasPrefix(f.Pending[1], "relu (ReLU, grid 2x1, args 0x") {
		t.Errorf("fault %+v", f)
	}
	for _, want := range []string{"cuda:test: add: CUDA_ERROR_ILLEGAL_ADDRESS", "relu (ReLU", "cuda.sync_launches: true", SyncLaunchesEnv + "=1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	copies := drv.copies
	got := backend.DownloadFloat32(b, v[2])
	if got[0] != 0 || drv.copies != copies {
		t.Errorf("a download after the fault: %v, %d copies; want zeros and no copy", got[:2], drv.copies-copies)
	}
	if _, _, ceErr := b.CrossEntropy(backend.Shape4{N: 1, C: 3, H: 10, W: 10}, v[0], backend.View{Buf: v[3].Buf, DT: backend.Uint8, Len: 100}); ceErr != err {
		t.Errorf("CrossEntropy after the fault: %v", ceErr)
	}
	if b.UnscaleCheck(v[:1], 1) {
		t.Error("UnscaleCheck after a fault reports finite gradients")
	}
	if again := b.Sync(); again != err {
		t.Errorf("Sync again: %v", again)
	}
}

// TestSyncLaunchesNameTheKernel: with sync launches (cuda.sync_launches,
// MEMUNET_CUDA_SYNC=1) the fault names the kernel that caused it and its
// operation, not the next one.
func TestSyncLaunchesNameTheKernel(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		if viaEnv {
			t.Setenv(SyncLaunchesEnv, "1")
		}
		b, _, v := faultEnv(t, 10)
		if !viaEnv {
			b.SetSyncLaunches(true)
		}
		b.Add(v[0], v[1], v[2])
		b.ReLU(v[1], v[0])
		b.Add(v[2], v[1], v[0])
		err := b.Sync()
		var f *FaultError
		if !errors.As(err, &f) || !strings.HasPrefix(f.Kernel, "relu (ReLU, grid 1x1, args 0x") ||
			!strings.HasPrefix(err.Error(), "cuda:test: kernel relu (ReLU, grid 1x1") || strings.Contains(err.Error(), "add") {
			t.Errorf("env %v: %v", viaEnv, err)
		}
	}
}
