//go:build gpu

package cudnn

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cudnnapi_calls.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/memunet/memunet/backend"
)

// Library is a cuDNN opened by the loader: its file, version and entry
// points. It stays open for the life of the process.
type Library struct {
	// Path is the file the dynamic loader opened; From how it was found
	// (Place.From).
	Path, From string
	Version    Version
	// CUDA is the CUDA runtime version the library was built for (12.6).
	CUDA string
	api  C.mc_api
}

// String names the library for the banner and summary.json: "cuDNN 9.6.0
// (CUDA 12.6) from /usr/lib/x86_64-linux-gnu/libcudnn.so.9".
func (l *Library) String() string {
	return fmt.Sprintf("cuDNN %s (CUDA %s) from %s", l.Version, l.CUDA, l.Path)
}

var process struct {
	once sync.Once
	lib  *Library
	err  error
}

// Load opens cuDNN once per process, from the first of Places (read from
// the environment at the first call) that holds a library with every entry
// point cudnnapi.h declares and a version of at least MinVersion. Its
// error is a *LoadError naming every place tried and the fix. Loading
// needs no GPU or driver: creating a handle does (NewHandle).
func Load() (*Library, error) {
	process.once.Do(func() { process.lib, process.err = open(os.Getenv) })
	return process.lib, process.err
}

// open is Load without the once: the places getenv gives, tried in order.
func open(getenv func(string) string) (*Library, error) {
	var tried []Attempt
	for _, group := range placeGroups(getenv) {
		places := group()
		if len(places) == 0 {
			tried = append(tried, Attempt{Place: Place{"site-packages/nvidia/cudnn/lib/libcudnn.so.{9,8}", "a PyTorch wheel's cuDNN"},
				Why: "no Python site-packages folder found (python3 on PATH asked, the usual prefixes looked in)", Err: ErrNotFound})
		}
		for _, p := range places {
			lib, a := try(p)
			if lib != nil {
				return lib, nil
			}
			tried = append(tried, a)
		}
	}
	return nil, newLoadError(tried)
}

// try opens the library at p: a *Library, or the Attempt that says why not.
func try(p Place) (*Library, Attempt) {
	a := Attempt{Place: p, Err: ErrNotFound}
	if strings.Contains(p.Path, "/") {
		if _, err := os.Stat(p.Path); errors.Is(err, os.ErrNotExist) {
			a.Why = "no such file"
			return nil, a
		}
	}
	l := &Library{From: p.From}
	path := C.CString(p.Path)
	defer C.free(unsafe.Pointer(path))
	var handle unsafe.Pointer
	var loaded, why [4096]C.char
	switch C.mc_open(path, &l.api, &handle, &loaded[0], C.size_t(len(loaded)), &why[0], C.size_t(len(why))) {
	case 0:
	case 1:
		a.Why = C.GoString(&why[0])
		return nil, a
	default:
		a.Opened, a.Err = true, ErrNotCUDNN
		a.Why = "opens, but lacks " + C.GoString(&why[0])
		return nil, a
	}
	l.Path = C.GoString(&loaded[0])
	l.Version = ParseVersion(int(C.mc_version(&l.api)))
	l.CUDA = CUDAVersion(int(C.mc_cudart_version(&l.api)))
	if l.Version.Less(MinVersion) {
		C.mc_close(handle)
		a.Opened, a.Err = true, ErrTooOld
		a.Why = fmt.Sprintf("%s is cuDNN %s, older than %s", l.Path, l.Version, MinVersion)
		return nil, a
	}
	return l, a
}

// Error is a cuDNN call that failed: its status and cudnnGetErrorString's
// name for it.
type Error struct {
	Call   string
	Status int
	Text   string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s (status %d)", e.Call, e.Text, e.Status) }

// check is nil for CUDNN_STATUS_SUCCESS, else the call's *Error.
func (l *Library) check(call string, s C.mc_status) error {
	if s == C.MC_CUDNN_STATUS_SUCCESS {
		return nil
	}
	text := "unknown status"
	if p := C.mc_error_string(&l.api, s); p != nil {
		text = C.GoString(p)
	}
	return &Error{Call: call, Status: int(s), Text: text}
}

// Handle is a cuDNN handle: cuDNN's state on one device. Its calls, as
// NewHandle, need the device's CUDA context current on the calling OS
// thread (cuDNN works in the context that is current; the CUDA backend's
// driver makes its context current for each call).
type Handle struct {
	lib   *Library
	h     C.mc_handle
	mu    sync.Mutex
	convs map[convKey]*C.mc_conv // descriptors by shape and precision (conv)
}

// NewHandle is cudnnCreate, in the context current on this OS thread.
// Where the driver cannot start (no libcuda.so.1, or cuInit fails: no GPU)
// the error wraps ErrNoDriver and says what to do; a cuDNN that cannot
// load its sub-libraries says where they must be.
func (l *Library) NewHandle() (*Handle, error) {
	var h C.mc_handle
	err := l.check("cudnnCreate", C.mc_create(&l.api, &h))
	if err == nil {
		return &Handle{lib: l, h: h}, nil
	}
	if reason, ok := driverState(); !ok {
		return nil, fmt.Errorf("%s loaded, but %w (%s; %v): cuDNN computes on an NVIDIA GPU. "+
			"Set cuda.conv: memunet or device: cpu here, or run where nvidia-smi works", l, ErrNoDriver, reason, err)
	}
	hint := ""
	if strings.Contains(err.Error(), "SUBLIBRARY") {
		hint = "; cuDNN 9 opens its sub-libraries (libcudnn_*.so.9, of the same version) from the loader path or its own folder: " +
			"put that folder first in LD_LIBRARY_PATH"
	}
	return nil, fmt.Errorf("%s: %w%s", l, err, hint)
}

// driverState reports whether the CUDA driver starts here (libcuda.so.1
// opens and cuInit succeeds), and why not.
func driverState() (reason string, ok bool) {
	var why [1024]C.char
	switch r := C.mc_driver_state(&why[0], C.size_t(len(why))); {
	case r == 0:
		return "", true
	case r > 0:
		return fmt.Sprintf("cuInit returned CUDA error %d", int(r)), false
	}
	return C.GoString(&why[0]), false
}

// SetStream is cudnnSetStream: the handle's work goes to stream s, a
// CUstream as an integer (0: the default stream).
func (h *Handle) SetStream(s uintptr) error {
	return h.lib.check("cudnnSetStream", C.mc_set_stream(&h.lib.api, h.h, C.uintptr_t(s)))
}

// Close destroys the descriptors the handle made, then the handle
// (cudnnDestroy).
func (h *Handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, d := range h.convs {
		C.mc_conv_free(&h.lib.api, d)
		C.free(unsafe.Pointer(d))
		delete(h.convs, k)
	}
	return h.lib.check("cudnnDestroy", C.mc_destroy(&h.lib.api, h.h))
}

// precisions maps a table's precision to cuDNN's data type and math type
// (PyTorch's choices): tf32 is fp32 data with default math, which lets
// cuDNN 8+ use TF32 tensor cores; fp32 exact is FMA math; fp16 and bf16
// use the tensor cores. Every convolution sums in fp32.
var precisions = map[string][2]C.mc_enum{
	"tf32": {C.MC_CUDNN_DATA_FLOAT, C.MC_CUDNN_DEFAULT_MATH},
	"fp32": {C.MC_CUDNN_DATA_FLOAT, C.MC_CUDNN_FMA_MATH},
	"fp16": {C.MC_CUDNN_DATA_HALF, C.MC_CUDNN_TENSOR_OP_MATH},
	"bf16": {C.MC_CUDNN_DATA_BFLOAT16, C.MC_CUDNN_TENSOR_OP_MATH},
}

// Find is cuDNN's Find for one pass of a convolution of shape s at
// precision (tf32, fp32, fp16 or bf16): every algorithm timed on buffers
// cuDNN allocates itself, fastest first, as Results (what a Table
// records). It needs the device's context current on this OS thread, or
// none (cuDNN then takes device 0's primary context, the one the CUDA
// backend uses).
func (h *Handle) Find(pass Pass, s Shape, precision string) ([]Result, error) {
	if pass < 0 || pass >= numPasses {
		return nil, fmt.Errorf("cudnn: no pass %d", int(pass))
	}
	d, err := h.conv(s, precision)
	if err != nil {
		return nil, err
	}
	var perf [C.MC_MAX_ALGOS]C.mc_perf
	var got C.int
	var call *C.char
	h.mu.Lock() // the descriptor's math type is set for this call
	st := C.mc_find(&h.lib.api, h.h, d, C.int(pass), precisions[precision][1], &perf[0], &got, &call)
	h.mu.Unlock()
	if err := h.lib.check(C.GoString(call), st); err != nil {
		return nil, fmt.Errorf("cudnn: %s %s of %+v: %w", precision, pass, s, err)
	}
	out := make([]Result, 0, int(got))
	for _, p := range perf[:min(int(got), len(perf))] {
		out = append(out, Result{Algo: int(p.algo), Name: AlgoName(pass, int(p.algo)), Status: int(p.status), TimeMS: float64(p.time),
			WorkspaceBytes: int64(p.memory), Deterministic: p.determinism == C.MC_CUDNN_DETERMINISTIC, MathType: int(p.mathType)})
	}
	return out, nil
}

// Record is a Table of Find's results at precision for every pass of
// each of layers (no backward data pass where a layer has no input
// gradient), checked (Table.Check), as measured on device: what a device
// run commits as test fixtures. It needs the context current, as Find
// does.
func (h *Handle) Record(layers []backend.LayerShape, device, precision string) (Table, error) {
	tab := Table{Note: "recorded by Handle.Record: cudnnFind*Algorithm on the listed convolutions, unedited",
		Device: device, CUDNN: h.lib.String(), Precision: precision}
	for _, ls := range layers {
		s := ConvShapeOf(ls.Conv)
		for p := Forward; p < numPasses; p++ {
			if p == BackwardData && ls.NoInputGrad {
				continue
			}
			rs, err := h.Find(p, s, precision)
			if err != nil {
				return tab, fmt.Errorf("%s %s: %w", ls.Name, p, err)
			}
			tab.Layers = append(tab.Layers, Entry{Layer: ls.Name, Pass: p, Shape: s, Results: rs})
		}
	}
	return tab, tab.Check()
}

// Run computes pass of the convolution of shape s at precision with
// algorithm a (its math type set on the descriptor first) on b's device
// memory (Buffers), on the handle's stream. It needs the device's context
// current, as Find does.
func (h *Handle) Run(pass Pass, s Shape, precision string, a Algorithm, b Buffers) error {
	if pass < 0 || pass >= numPasses {
		return fmt.Errorf("cudnn: no pass %d", int(pass))
	}
	if !mathAllowed(precision, a.MathType) {
		return fmt.Errorf("cudnn: %s %s with math type %d: exact fp32 runs FMA math only (%d)", precision, pass, a.MathType, MathFMA)
	}
	d, err := h.conv(s, precision)
	if err != nil {
		return err
	}
	var beta C.float
	if b.Accumulate {
		beta = 1
	}
	var call *C.char
	h.mu.Lock() // the descriptor's math type is set for this call
	st := C.mc_run(&h.lib.api, h.h, d, C.int(pass), C.mc_enum(a.Algo), C.mc_enum(a.MathType), C.uintptr_t(b.X), C.uintptr_t(b.W),
		C.uintptr_t(b.Y), C.uintptr_t(b.Workspace), C.size_t(b.WorkspaceBytes), beta, &call)
	h.mu.Unlock()
	if err := h.lib.check(C.GoString(call), st); err != nil {
		return fmt.Errorf("cudnn: %s %s of %+v with %s (math type %d): %w", precision, pass, s, AlgoName(pass, a.Algo), a.MathType, err)
	}
	return nil
}

// convKey is a convolution's shape and precision, as the handle keeps
// their descriptors.
type convKey struct {
	shape     string
	precision string
}

// conv is the descriptors of the convolution of shape s at precision,
// made at its first use and kept until Close (C memory: cuDNN reads them
// at every call).
func (h *Handle) conv(s Shape, precision string) (*C.mc_conv, error) {
	key := convKey{fmt.Sprint(s), precision}
	h.mu.Lock()
	defer h.mu.Unlock()
	if d, ok := h.convs[key]; ok {
		return d, nil
	}
	types, ok := precisions[precision]
	if !ok {
		return nil, fmt.Errorf("cudnn: precision %q: want tf32, fp32, fp16 or bf16", precision)
	}
	if precision == "bf16" && h.lib.Version.Less(MinBF16Version) {
		return nil, fmt.Errorf("cudnn: %s has no bf16 convolutions (cuDNN %s or newer has)", h.lib, MinBF16Version)
	}
	out, err := s.Output()
	if err != nil {
		return nil, err
	}
	dims := len(s.Input)
	x, w, y := make([]C.int, dims), make([]C.int, dims), make([]C.int, dims)
	pads, strides := make([]C.int, dims-2), make([]C.int, dims-2)
	for i := range dims {
		x[i], w[i], y[i] = C.int(s.Input[i]), C.int(s.Filter[i]), C.int(out[i])
	}
	for i := range dims - 2 {
		pads[i], strides[i] = C.int(s.PadAt(i)), C.int(s.StrideAt(i))
	}
	d := (*C.mc_conv)(C.calloc(1, C.size_t(unsafe.Sizeof(C.mc_conv{}))))
	var call *C.char
	st := C.mc_conv_make(&h.lib.api, d, types[0], types[1], C.int(dims), &x[0], &w[0], &y[0], &pads[0], &strides[0], &call)
	if err := h.lib.check(C.GoString(call), st); err != nil {
		C.free(unsafe.Pointer(d))
		return nil, fmt.Errorf("cudnn: %s %+v: %w", precision, s, err)
	}
	if h.convs == nil {
		h.convs = map[convKey]*C.mc_conv{}
	}
	h.convs[key] = d
	return d, nil
}
