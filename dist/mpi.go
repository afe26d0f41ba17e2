//go:build mpi

package dist

/*
#cgo pkg-config: ompi-c
#include <mpi.h>
#include <stdlib.h>

static int memunet_init(int *provided) {
	return MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, provided);
}
static int memunet_rank(int *r) { return MPI_Comm_rank(MPI_COMM_WORLD, r); }
static int memunet_size(int *s) { return MPI_Comm_size(MPI_COMM_WORLD, s); }
static int memunet_allreduce_f32(float *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static int memunet_allreduce_f64(double *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
static int memunet_bcast_f32(float *buf, int n, int root) {
	return MPI_Bcast(buf, n, MPI_FLOAT, root, MPI_COMM_WORLD);
}
static int memunet_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }
static int memunet_finalize(void) { return MPI_Finalize(); }
static void memunet_version(char *out, int *len) { MPI_Get_library_version(out, len); }
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// chunk bounds one MPI call's count (an int in C).
const chunk = 1 << 28

// mpiComm is MPI_COMM_WORLD, driven from one locked goroutine.
type mpiComm struct {
	rank, size int
	name       string
	calls      chan func()
}

func openMPI() (Comm, error) {
	c := &mpiComm{calls: make(chan func())}
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // MPI_THREAD_FUNNELED: every call from this thread
		var provided, rank, size C.int
		if rc := C.memunet_init(&provided); rc != 0 {
			started <- fmt.Errorf("dist: MPI_Init_thread failed (%d)", int(rc))
			return
		}
		C.memunet_rank(&rank)
		C.memunet_size(&size)
		buf := make([]byte, 8192)
		var n C.int
		C.memunet_version((*C.char)(unsafe.Pointer(&buf[0])), &n)
		c.rank, c.size = int(rank), int(size)
		c.name = "MPI (" + strings.TrimSpace(strings.SplitN(string(buf[:n]), ",", 2)[0]) + ")"
		started <- nil
		for f := range c.calls {
			f()
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// do runs f on the MPI thread and returns its error.
func (c *mpiComm) do(what string, f func() C.int) error {
	done := make(chan C.int)
	c.calls <- func() { done <- f() }
	if rc := <-done; rc != 0 {
		return fmt.Errorf("dist: %s failed on rank %d (MPI error %d)", what, c.rank, int(rc))
	}
	return nil
}

func (c *mpiComm) Rank() int    { return c.rank }
func (c *mpiComm) Size() int    { return c.size }
func (c *mpiComm) Name() string { return c.name }

// chunked runs f on buf in parts of at most chunk values (MPI counts are
// C ints); an empty buf makes no call.
func chunked[T any](buf []T, f func(part []T) error) error {
	for lo := 0; lo < len(buf); lo += chunk {
		if err := f(buf[lo:min(lo+chunk, len(buf))]); err != nil {
			return err
		}
	}
	return nil
}

func (c *mpiComm) AllReduceSum(buf []float32) error {
	return chunked(buf, func(part []float32) error {
		return c.do("MPI_Allreduce", func() C.int {
			return C.memunet_allreduce_f32((*C.float)(unsafe.Pointer(&part[0])), C.int(len(part)))
		})
	})
}

func (c *mpiComm) AllReduceSum64(buf []float64) error {
	return chunked(buf, func(part []float64) error {
		return c.do("MPI_Allreduce", func() C.int {
			return C.memunet_allreduce_f64((*C.double)(unsafe.Pointer(&part[0])), C.int(len(part)))
		})
	})
}

func (c *mpiComm) Broadcast(buf []float32, root int) error {
	return chunked(buf, func(part []float32) error {
		return c.do("MPI_Bcast", func() C.int {
			return C.memunet_bcast_f32((*C.float)(unsafe.Pointer(&part[0])), C.int(len(part)), C.int(root))
		})
	})
}

func (c *mpiComm) Barrier() error {
	return c.do("MPI_Barrier", func() C.int { return C.memunet_barrier() })
}

func (c *mpiComm) Close() error {
	err := c.do("MPI_Finalize", func() C.int { return C.memunet_finalize() })
	close(c.calls)
	return err
}

// mpiBuilt reports a build with -tags mpi.
const mpiBuilt = true
