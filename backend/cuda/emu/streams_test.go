//go:build cudaemu

package emu_test

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/train"
)

// pinned is n bytes of d's pinned host memory holding 1, 2, 3, ...
func pinned(t *testing.T, d *emu.Device, n int) []byte {
	t.Helper()
	p, err := d.AllocHost(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	b := unsafe.Slice((*byte)(p), n)
	for i := range b {
		b[i] = byte(i + 1)
	}
	return b
}

// TestCopyStreamOrder: the emulator's copy stream runs a copy only when
// something waits for it, and work that relies on an order no event gave
// is a fault: a memset, a kernel or a synchronous copy touching bytes a
// queued copy uses, freeing device or pinned memory it uses. Waiting for
// the copy's event orders it: the copy then runs first.
func TestCopyStreamOrder(t *testing.T) {
	const n = 4096
	for _, c := range []struct {
		name, want string
		misuse     func(d *emu.Device, dev uintptr, host []byte) error
	}{
		{"memset", "cuMemsetD32 touches bytes", func(d *emu.Device, dev uintptr, _ []byte) error { return d.MemsetD32(dev, 0, n/4) }},
		{"download", "cuMemcpyDtoH touches bytes", func(d *emu.Device, dev uintptr, _ []byte) error {
			return d.CopyDtoH(make([]byte, 8), dev+16)
		}},
		{"kernel", "kernel relu, argument 0, touches bytes", func(d *emu.Device, dev uintptr, _ []byte) error {
			return d.LaunchChecked(cuda.KReLU, 1, 1, []uint64{uint64(dev), uint64(dev), 0, n / 4},
				[]cuda.Extent{{Addr: dev, Bytes: n}, {Addr: dev, Bytes: n}})
		}},
		{"free", "cuMemFree of 4096 bytes", func(d *emu.Device, dev uintptr, _ []byte) error { return d.Free(dev) }},
		{"free pinned", "cuMemFreeHost of 4096 bytes", func(d *emu.Device, _ uintptr, host []byte) error {
			return d.FreeHost(unsafe.Pointer(&host[0]))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := emu.New(1 << 20)
			dev := deviceBuffer(t, d, n/4)
			host := pinned(t, d, n)
			if err := d.CopyToHostAsync(unsafe.Pointer(&host[0]), dev, n); err != nil {
				t.Fatal(err)
			}
			if d.PendingCopies() != 1 {
				t.Fatalf("%d copies queued, want the one not waited for", d.PendingCopies())
			}
			err := c.misuse(d, dev, host) // the fault, or nil (it comes with the next call)
			if err == nil {
				err = d.Sync()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%s while a copy uses the bytes: %v, want a fault saying %q", c.name, err, c.want)
			}
			t.Log(err)
		})
	}
	t.Run("ordered", func(t *testing.T) {
		d := emu.New(1 << 20)
		dev := deviceBuffer(t, d, n/4)
		host := pinned(t, d, n)
		want := make([]byte, n)
		if err := d.CopyDtoH(want, dev); err != nil {
			t.Fatal(err)
		}
		if err := d.CopyToHostAsync(unsafe.Pointer(&host[0]), dev, n); err != nil {
			t.Fatal(err)
		}
		done, err := d.Record(cuda.CopyStream)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := d.EventDone(done); ok {
			t.Error("the copy's event happened before anything waited for it")
		}
		if err := d.WaitEvent(cuda.ComputeStream, done); err != nil {
			t.Fatal(err)
		}
		if err := d.MemsetD32(dev, 0, n/4); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		if string(host) != string(want) {
			t.Error("the copy did not run before the memset the compute stream issued after waiting for it")
		}
	})
}

// TestOffloadOverlapsCompute: the backend's offload copies run on the copy
// stream while later computation that does not touch their bytes goes on
// (the copy is still queued after it); work that touches them waits for
// the copy first, even through a buffer the pool freed and gave out
// again; the tensor comes back whole.
func TestOffloadOverlapsCompute(t *testing.T) {
	d := emu.New(1 << 30)
	gpu, err := cuda.New(d)
	if err != nil {
		t.Fatal(err)
	}
	pool := memory.NewPool(gpu.Allocator(), memory.Options{})
	host := memory.NewPool(gpu.HostAllocator(), memory.Options{})
	alloc := func(p *memory.Pool, n int) backend.View {
		buf, err := p.Alloc(memory.Activations, int64(4*n))
		if err != nil {
			t.Fatal(err)
		}
		return backend.View{Buf: buf, DT: backend.Float32, Len: n}
	}
	const n = 3000
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i) - 1000
	}
	src, other := alloc(pool, n), alloc(pool, n)
	backend.UploadFloat32(gpu, src, vals)
	backend.UploadFloat32(gpu, other, vals)
	saved := alloc(host, n)
	gpu.ToHost(saved, src)
	gpu.ReLU(other, other) // does not touch src: no wait
	if d.PendingCopies() != 1 {
		t.Errorf("%d copies queued after unrelated work; the offload should still be running beside it", d.PendingCopies())
	}
	// The pool gives src's bytes out again; writing them waits for the copy.
	pool.MustFree(src.Buf)
	reused := alloc(pool, n)
	gpu.Fill(reused, 7)
	if d.PendingCopies() != 0 {
		t.Errorf("%d copies queued after work that overwrote their source", d.PendingCopies())
	}
	back := alloc(pool, n)
	gpu.ToDevice(back, saved)
	got := backend.DownloadFloat32(gpu, back)
	if err := gpu.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		if got[i] != vals[i] {
			t.Fatalf("value %d came back as %v, was %v", i, got[i], vals[i])
		}
	}
	host.MustFree(saved.Buf)
	host.EmptyCache()
	if err := gpu.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestProfileOnDeviceClock: a profile on the CUDA backend times each kind
// of layer with the device's events (emulated: when each event happened),
// and gives every event back.
func TestProfileOnDeviceClock(t *testing.T) {
	d := emu.New(1 << 30)
	gpu, err := cuda.New(d)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig()
	cfg.Train.Steps = 3
	row, err := train.Bench(cfg, gpu, 2)
	if err != nil {
		t.Fatal(err)
	}
	if row.KindMS[0] <= 0 || row.KindMS[1] <= 0 {
		t.Errorf("conv forward %.3f ms, backward %.3f ms: no time on the device's clock", row.KindMS[0], row.KindMS[1])
	}
	if err := gpu.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := d.LiveEvents(); n != 0 {
		t.Errorf("%d events still held after the profile was read", n)
	}
	t.Logf("per step: %+v", row.KindMS)
}

// TestBenchLayers: the per-layer benchmark times every pass of each layer
// at each precision on the device's clock (emulated), skipping the first
// layer's input gradient, and leaves TF32 as it found it.
func TestBenchLayers(t *testing.T) {
	gpu, err := emu.Backend(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	layers := backend.SeedUNetConvolutions(4, 16, 1)[:3]
	rows, err := cuda.BenchLayers(gpu, [2]int{4, 16}, layers, []string{"tf32", "fp16", "bf16", "fp32"}, 1, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4*(2+3+3) || !gpu.ConvTF32() {
		t.Fatalf("%d rows (want 32), TF32 %v after", len(rows), gpu.ConvTF32())
	}
	for _, r := range rows {
		if r.MS <= 0 || r.TFLOPs <= 0 || r.Base != 4 || r.Size != 16 {
			t.Errorf("%+v: no time", r)
		}
	}
	t.Logf("%+v", rows[0])
}
