//go:build cudaemu

package emu_test

import (
	"encoding/binary"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/memory"
)

// deviceBuffer is n float32 values of d's memory, filled with 1, 2, 3, ...
func deviceBuffer(t *testing.T, d *emu.Device, n int) uintptr {
	t.Helper()
	p, err := d.Alloc(int64(4 * n))
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(vals[4*i:], math.Float32bits(float32(i+1)))
	}
	if err := d.CopyHtoD(p, vals); err != nil {
		t.Fatal(err)
	}
	return p
}

// plantedFault runs a planted kernel and returns the device's fault, which
// it must have.
func plantedFault(t *testing.T, d *emu.Device, p emu.Planted, gx int, args []uint64, extents []cuda.Extent) string {
	t.Helper()
	if err := d.LaunchPlanted(p, gx, 1, args, extents); err != nil {
		t.Fatalf("the launch itself: %v", err)
	}
	err := d.Sync()
	if err == nil {
		t.Fatalf("%s ran clean", p)
	}
	if again := d.CopyDtoH(make([]byte, 4), uintptr(args[0])); again != err {
		t.Errorf("a copy after the fault: %v; want the fault again", again)
	}
	t.Log(err)
	return err.Error()
}

// TestSanitizerFindsMissingBarrier: threads that pass values through shared
// memory without __syncthreads are reported with the kernel, block, both
// threads and the word's offset.
func TestSanitizerFindsMissingBarrier(t *testing.T) {
	d := emu.New(1 << 20)
	in, out := deviceBuffer(t, d, 256), deviceBuffer(t, d, 256)
	msg := plantedFault(t, d, emu.MissingBarrier, 1, []uint64{uint64(out), uint64(in)},
		[]cuda.Extent{{Addr: out, Bytes: 1024}, {Addr: in, Bytes: 1024}})
	race := regexp.MustCompile(`kernel missing_barrier, block \(0,0\), thread (\d+): shared s byte (\d+) read since another thread wrote it \(thread (\d+)\) since the last __syncthreads`)
	m := race.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no race named: %s", msg)
	}
	if reader, byte_, writer := atoi(m[1]), atoi(m[2]), atoi(m[3]); writer != reader^1 || byte_ != 4*writer {
		t.Errorf("thread %d read byte %d, written by thread %d: want its neighbour's word", reader, byte_, writer)
	}
}

// TestSanitizerFindsReadPastView: a read one value past a view, inside its
// buffer (a GPU reads the next view's value without a fault), is out of
// bounds: kernel, thread and offset named.
func TestSanitizerFindsReadPastView(t *testing.T) {
	d := emu.New(1 << 20)
	const n = 300
	buf, out := deviceBuffer(t, d, 2*n), deviceBuffer(t, d, n)
	// The view is buf's first half: the value past it is buf's.
	msg := plantedFault(t, d, emu.ReadPastView, 2, []uint64{uint64(out), uint64(buf), n},
		[]cuda.Extent{{Addr: out, Bytes: 4 * n}, {Addr: buf, Bytes: 4 * n}})
	want := "kernel read_past_view, block (1,0), thread 43: read of 4 bytes at byte 1200 of argument 1, which has 1200 bytes: out of bounds"
	if !strings.Contains(msg, want) || strings.Count(msg, "out of bounds") != 1 {
		t.Errorf("got %s\nwant %s, once", msg, want)
	}
}

// TestSanitizerFindsBlocksWritingOneWord: two blocks writing the same word
// in one launch race, whichever order they ran in.
func TestSanitizerFindsBlocksWritingOneWord(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		d := emu.New(1 << 20)
		d.SetSeed(seed)
		out := deviceBuffer(t, d, 1)
		msg := plantedFault(t, d, emu.BlocksWriteOneWord, 2, []uint64{uint64(out)}, []cuda.Extent{{Addr: out, Bytes: 4}})
		race := regexp.MustCompile(`kernel blocks_write_one_word, block \((\d),0\), thread 0: write of byte 0 of argument 0, which block \((\d),0\) wrote in this launch: blocks race`)
		if m := race.FindStringSubmatch(msg); m == nil || m[1] == m[2] {
			t.Errorf("seed %d: %s", seed, msg)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = 10*n + int(c-'0')
	}
	return n
}

// TestFaultNamesItsKernel: a fault planted in the backend's own path (a
// relu that writes past its output's end) gives an error that names that
// kernel, as the one that failed, not the add after it, and no panic:
// downloads come back zeroed and a step's Sync returns the error. With
// sync launches the error names only relu and its operation.
func TestFaultNamesItsKernel(t *testing.T) {
	for _, syncLaunches := range []bool{false, true} {
		d := emu.New(1 << 30)
		b, err := cuda.New(d)
		if err != nil {
			t.Fatal(err)
		}
		b.SetSyncLaunches(syncLaunches)
		d.Substitute(cuda.KReLU, emu.ReLUWritePastEnd)
		pool := memory.NewPool(b.Allocator(), memory.Options{})
		views := make([]backend.View, 3)
		for i := range views {
			buf, err := pool.Alloc(memory.Activations, 4*1000)
			if err != nil {
				t.Fatal(err)
			}
			views[i] = backend.View{Buf: buf, DT: backend.Float32, Len: 1000}
			backend.UploadFloat32(b, views[i], make([]float32, 1000))
		}
		b.ReLU(views[1], views[0])
		b.Add(views[2], views[1], views[0])
		got := backend.DownloadFloat32(b, views[2])
		err = b.Sync()
		var f *cuda.FaultError
		if !errors.As(err, &f) {
			t.Fatalf("sync launches %v: %v", syncLaunches, err)
		}
		msg := err.Error()
		t.Log(msg)
		if !strings.Contains(msg, "kernel relu_write_past_end (in place of relu), block (3,0), thread 231: write of 4 bytes at byte 4000 of argument 0, which has 4000 bytes: out of bounds") ||
			!strings.Contains(msg, "relu (ReLU, grid 4x1") || got[0] != 0 {
			t.Errorf("sync launches %v: the error does not name the faulting kernel: %s", syncLaunches, msg)
		}
		if syncLaunches && (!strings.HasPrefix(msg, "cuda:emu: kernel relu (ReLU, grid 4x1") || strings.Contains(msg, "add")) {
			t.Errorf("with sync launches the error names more than relu: %s", msg)
		}
	}
}

// TestBlockOrderSeeded: blocks start in an order shuffled by the seed, the
// same for the same seed: with one block at a time, the race on one word
// names the same first two blocks for a seed, and other blocks for other
// seeds.
func TestBlockOrderSeeded(t *testing.T) {
	firstTwo := func(seed uint64) string {
		d := emu.New(1 << 20)
		d.SetSeed(seed)
		d.SetWorkers(1)
		out := deviceBuffer(t, d, 1)
		msg := plantedFault(t, d, emu.BlocksWriteOneWord, 64, []uint64{uint64(out)}, []cuda.Extent{{Addr: out, Bytes: 4}})
		m := regexp.MustCompile(`block \((\d+),0\), thread 0: write of byte 0 of argument 0, which block \((\d+),0\)`).FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("seed %d: %s", seed, msg)
		}
		return m[2] + " then " + m[1]
	}
	orders := map[string]bool{}
	for seed := uint64(1); seed <= 4; seed++ {
		a, b := firstTwo(seed), firstTwo(seed)
		if a != b {
			t.Errorf("seed %d: blocks %s, then %s", seed, a, b)
		}
		orders[a] = true
	}
	if len(orders) < 3 {
		t.Errorf("4 seeds started 64 blocks in %d orders: %v", len(orders), orders)
	}
}
