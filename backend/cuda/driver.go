package cuda

import (
	"errors"
	"unsafe"
)

// Driver is what the backend needs of a CUDA device: memory, copies and
// kernel launches, all on the device's default stream. Pointers are device
// addresses. The real one is gorgonia.org/cu's (Open, in the gpu build);
// backend/cuda/emu runs the same kernels on the host, to test the backend
// where there is no GPU.
type Driver interface {
	// Name is the device, e.g. "cuda:0".
	Name() string
	// Alloc returns bytes of device memory; an error wrapping
	// ErrDeviceFull when the device has not that much free.
	Alloc(bytes int64) (uintptr, error)
	Free(p uintptr) error
	// AllocHost returns bytes of pinned host memory (cuMemHostAlloc), which
	// the device copies to and from directly; FreeHost gives it back.
	AllocHost(bytes int64) (unsafe.Pointer, error)
	FreeHost(p unsafe.Pointer) error
	// Launch runs kernel k on gx*gy blocks of BlockThreads threads, each
	// argument 64 bits (pointers, int64, float64 bits).
	Launch(k Kernel, gx, gy int, args []uint64) error
	MemsetD32(p uintptr, v uint32, n int64) error
	MemsetD16(p uintptr, v uint16, n int64) error
	CopyHtoD(dst uintptr, src []byte) error
	CopyDtoH(dst []byte, src uintptr) error
	CopyDtoD(dst, src uintptr, n int64) error
	// Sync waits for everything issued.
	Sync() error
	// MemInfo is the device's free and total memory (cuMemGetInfo).
	MemInfo() (free, total int64, err error)
}

// Pager is a Driver whose device maps memory page by page (CUDA's virtual
// memory management: cuMemAddressReserve, cuMemCreate, cuMemMap): the
// caching pool then keeps one heap of address space and backs only the
// pages it uses (memory.Pager).
type Pager interface {
	// Granularity is the page in bytes (cuMemGetAllocationGranularity),
	// 0 when the device cannot map pages.
	Granularity() int64
	// Reserve takes bytes of address space, aligned to a page.
	Reserve(bytes int64) (uintptr, error)
	// Map backs [p, p+bytes), whole pages, with device memory, all or
	// nothing: an error wrapping ErrDeviceFull when the device has not that
	// much free.
	Map(p uintptr, bytes int64) error
	// Unmap gives the pages' memory back, once the device has finished
	// everything issued (a queued kernel may still read them).
	Unmap(p uintptr, bytes int64) error
	// Release gives back address space Reserve took, nothing of it mapped.
	Release(p uintptr, bytes int64) error
}

// ErrDeviceFull is wrapped by Driver.Alloc's error when the device is out
// of memory.
var ErrDeviceFull = errors.New("device memory exhausted")

// BlockThreads is every kernel's block size (ops.cu's RED_THREADS, gemm.cu's
// 256 threads per 64x64 tile).
const BlockThreads = 256

// Kernel is one of memunet's kernels (an entry of kernels/ops.ptx or
// kernels/gemm.ptx).
type Kernel int

const (
	KConvert Kernel = iota
	KReLU
	KReLUBack
	KMaxPool2
	KMaxPool2Back
	KUpsample2
	KUpsample2Back
	KConcat
	KSplit
	KAdd
	KBatchNorm
	KBatchNormEval
	KBatchNormBack
	KGroupNorm
	KGroupNormParamsBack
	KGroupNormBack
	KCrossEntropy
	KCrossEntropyBack
	KConfusion
	KArgmax
	KAdam
	KUnscaleCheck
	KBiasGrad
	KSGD
	KRMSprop
	KLossSums
	KLossBack
	KReLUMask
	KReLUBackMask
	KConv // gemm.ptx from here on
	KConvBackData
	KConvBackWeight
	KUpConv
	KUpConvBackData
	KUpConvBackWeight
	KSplitSum
	NumKernels
)

var kernelNames = [NumKernels]string{
	"convert", "relu", "relu_back", "max_pool2", "max_pool2_back", "upsample2", "upsample2_back",
	"concat", "split", "add", "batch_norm", "batch_norm_eval", "batch_norm_back",
	"group_norm", "group_norm_params_back", "group_norm_back", "cross_entropy", "cross_entropy_back",
	"confusion", "argmax", "adam", "unscale_check", "bias_grad", "sgd", "rmsprop", "loss_sums", "loss_back",
	"relu_mask", "relu_back_mask",
	"conv", "conv_back_data", "conv_back_weight", "up_conv", "up_conv_back_data", "up_conv_back_weight", "split_sum",
}

// String is the kernel's entry name in the PTX.
func (k Kernel) String() string { return kernelNames[k] }

// InGEMM reports a kernel of gemm.ptx (else ops.ptx).
func (k Kernel) InGEMM() bool { return k >= KConv }
