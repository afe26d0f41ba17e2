// cudnnapi_calls.h: what the Go side calls: cudnnapi.c's opening of a
// library into an mc_api, and the calls through one library's table.
#pragma once
#include <stdint.h>
#include "cudnnapi.h"

// mc_open opens the library at path (a file, or a name the dynamic loader
// searches for) and looks up every entry point into api. It returns 0 with
// the library in *lib and the file it was loaded from in loaded; 1 where
// the library does not open (why: dlerror's words); 2 where it opens but
// lacks entry points (why: their names, space-separated; the library is
// closed again).
int mc_open(const char *path, mc_api *api, void **lib, char *loaded, size_t loadedlen, char *why, size_t whylen);
// mc_close closes a library mc_open opened.
void mc_close(void *lib);
// mc_driver_state is -1 where libcuda.so.1 does not open (why: dlerror's
// words), else cuInit(0)'s result (0: the driver starts here).
int mc_driver_state(char *why, size_t whylen);

size_t mc_version(const mc_api *a);
size_t mc_cudart_version(const mc_api *a);
const char *mc_error_string(const mc_api *a, mc_status s);
mc_status mc_create(const mc_api *a, mc_handle *h);
mc_status mc_destroy(const mc_api *a, mc_handle h);
// mc_set_stream sets h's stream to s, a CUstream (cudaStream_t) as an
// integer (0: the default stream).
mc_status mc_set_stream(const mc_api *a, mc_handle h, uintptr_t s);

// MC_MAX_ALGOS bounds the rows of one pass's Find (cuDNN 9 has at most 8
// algorithms a pass).
#define MC_MAX_ALGOS 16

// mc_conv is one convolution's descriptors: nbdims-dimensional packed
// NCHW (NCDHW) tensors x (its input) and y (its output), filter w (KCRS),
// pad and stride on every spatial axis, no dilation, cross-correlation,
// dtype's data with fp32 sums and math. mc_conv_make makes them (on
// failure *call names the call that failed and what it made is
// destroyed); mc_conv_free destroys them.
typedef struct {
	mc_tensor x, y;
	mc_filter w;
	mc_convolution c;
} mc_conv;
mc_status mc_conv_make(const mc_api *a, mc_conv *d, mc_enum dtype, mc_enum math, int nbdims, const int *xdims,
                       const int *wdims, const int *ydims, const int *pads, const int *strides, const char **call);
void mc_conv_free(const mc_api *a, mc_conv *d);

// mc_find runs cuDNN's Find for one pass (0 forward, 1 backward data, 2
// backward filter) of convolution d under math type math (set on d
// first): cudnnFind*Algorithm, which allocates its own buffers and times
// every algorithm, under math and the default math type. The rows go to
// perf (at most MC_MAX_ALGOS), their count to *got; on failure *call
// names the call.
mc_status mc_find(const mc_api *a, mc_handle h, const mc_conv *d, int pass, mc_enum math, mc_perf *perf, int *got,
                  const char **call);

// mc_run runs one pass of convolution d with algorithm algo under math
// type math (set on d's convolution descriptor first) on device memory:
// forward y = x * w; backward data x = y (dy) * w; backward filter w = x *
// y (dy); the written one scaled by beta (0 or 1: accumulate) first; ws is
// wsbytes of workspace. *call names the call that failed.
mc_status mc_run(const mc_api *a, mc_handle h, const mc_conv *d, int pass, mc_enum algo, mc_enum math, uintptr_t x,
                 uintptr_t w, uintptr_t y, uintptr_t ws, size_t wsbytes, float beta, const char **call);
