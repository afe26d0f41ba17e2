//go:build gpu

// cudnnapi.c: a cuDNN library opened by path or name, its entry points
// looked up by name into an mc_api, and the calls through that table.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "cudnnapi_calls.h"

int mc_open(const char *path, mc_api *api, void **lib, char *loaded, size_t loadedlen, char *why, size_t whylen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	why[0] = 0;
	loaded[0] = 0;
	if (!h) {
		const char *e = dlerror();
		snprintf(why, whylen, "%s", e ? e : "dlopen failed");
		return 1;
	}
	struct link_map *map = 0;
	if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) {
		snprintf(loaded, loadedlen, "%s", map->l_name);
	} else {
		snprintf(loaded, loadedlen, "%s", path);
	}
	int missing = 0;
	size_t used = 0;
#define MC_LOOKUP(ret, name, params, args)                                                       \
	if (!(*(void **)&api->name = dlsym(h, #name))) {                                          \
		int n = snprintf(why + used, used < whylen ? whylen - used : 0, "%s%s", missing ? " " : "", #name); \
		if (n > 0) {                                                                          \
			used += (size_t)n;                                                               \
		}                                                                                     \
		missing++;                                                                            \
	}
	MC_ENTRIES(MC_LOOKUP)
	if (missing) {
		dlclose(h);
		return 2;
	}
	*lib = h;
	return 0;
}

void mc_close(void *lib) { dlclose(lib); }

int mc_driver_state(char *why, size_t whylen) {
	why[0] = 0;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, whylen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	unsigned int (*init)(unsigned int);
	*(void **)&init = dlsym(h, "cuInit");
	if (!init) {
		snprintf(why, whylen, "libcuda.so.1 has no cuInit");
		dlclose(h);
		return -1;
	}
	// The driver stays open once initialised (the CUDA backend opens it
	// too; unloading an initialised driver is not safe).
	return (int)init(0);
}

size_t mc_version(const mc_api *a) { return a->cudnnGetVersion(); }
size_t mc_cudart_version(const mc_api *a) { return a->cudnnGetCudartVersion(); }
const char *mc_error_string(const mc_api *a, mc_status s) { return a->cudnnGetErrorString(s); }
mc_status mc_create(const mc_api *a, mc_handle *h) { return a->cudnnCreate(h); }
mc_status mc_destroy(const mc_api *a, mc_handle h) { return a->cudnnDestroy(h); }
mc_status mc_set_stream(const mc_api *a, mc_handle h, uintptr_t s) { return a->cudnnSetStream(h, (mc_stream)s); }

// packed fills the strides of a packed tensor of dims.
static void packed(int n, const int *dims, int *strides) {
	int s = 1;
	for (int i = n - 1; i >= 0; i--) {
		strides[i] = s;
		s *= dims[i];
	}
}

#define MC_TRY(what, expr)       \
	if ((r = (expr)) != 0) { \
		*call = what;        \
		goto done;           \
	}

mc_status mc_conv_make(const mc_api *a, mc_conv *d, mc_enum dtype, mc_enum math, int nbdims, const int *xdims,
                       const int *wdims, const int *ydims, const int *pads, const int *strides, const char **call) {
	int xs[8], ys[8], dil[6];
	mc_status r = 0;
	memset(d, 0, sizeof *d); // nbdims is 4 or 5 (the Go side checks)
	packed(nbdims, xdims, xs);
	packed(nbdims, ydims, ys);
	for (int i = 0; i < nbdims - 2; i++) {
		dil[i] = 1;
	}
	MC_TRY("cudnnCreateTensorDescriptor", a->cudnnCreateTensorDescriptor(&d->x));
	MC_TRY("cudnnSetTensorNdDescriptor", a->cudnnSetTensorNdDescriptor(d->x, dtype, nbdims, xdims, xs));
	MC_TRY("cudnnCreateTensorDescriptor", a->cudnnCreateTensorDescriptor(&d->y));
	MC_TRY("cudnnSetTensorNdDescriptor", a->cudnnSetTensorNdDescriptor(d->y, dtype, nbdims, ydims, ys));
	MC_TRY("cudnnCreateFilterDescriptor", a->cudnnCreateFilterDescriptor(&d->w));
	MC_TRY("cudnnSetFilterNdDescriptor", a->cudnnSetFilterNdDescriptor(d->w, dtype, MC_CUDNN_TENSOR_NCHW, nbdims, wdims));
	MC_TRY("cudnnCreateConvolutionDescriptor", a->cudnnCreateConvolutionDescriptor(&d->c));
	MC_TRY("cudnnSetConvolutionNdDescriptor",
	       a->cudnnSetConvolutionNdDescriptor(d->c, nbdims - 2, pads, strides, dil, MC_CUDNN_CROSS_CORRELATION, MC_CUDNN_DATA_FLOAT));
	MC_TRY("cudnnSetConvolutionMathType", a->cudnnSetConvolutionMathType(d->c, math));
	return 0;
done:
	mc_conv_free(a, d);
	return r;
}

void mc_conv_free(const mc_api *a, mc_conv *d) {
	if (d->c) {
		a->cudnnDestroyConvolutionDescriptor(d->c);
	}
	if (d->w) {
		a->cudnnDestroyFilterDescriptor(d->w);
	}
	if (d->y) {
		a->cudnnDestroyTensorDescriptor(d->y);
	}
	if (d->x) {
		a->cudnnDestroyTensorDescriptor(d->x);
	}
	memset(d, 0, sizeof *d);
}

mc_status mc_find(const mc_api *a, mc_handle h, const mc_conv *d, int pass, mc_enum math, mc_perf *perf, int *got,
                  const char **call) {
	*got = 0;
	// The precision's math type (a run may have left another on d).
	mc_status r = a->cudnnSetConvolutionMathType(d->c, math);
	if (r != 0) {
		*call = "cudnnSetConvolutionMathType";
		return r;
	}
	switch (pass) {
	case 0:
		*call = "cudnnFindConvolutionForwardAlgorithm";
		return a->cudnnFindConvolutionForwardAlgorithm(h, d->x, d->w, d->c, d->y, MC_MAX_ALGOS, got, perf);
	case 1:
		*call = "cudnnFindConvolutionBackwardDataAlgorithm";
		return a->cudnnFindConvolutionBackwardDataAlgorithm(h, d->w, d->y, d->c, d->x, MC_MAX_ALGOS, got, perf);
	}
	*call = "cudnnFindConvolutionBackwardFilterAlgorithm";
	return a->cudnnFindConvolutionBackwardFilterAlgorithm(h, d->x, d->y, d->c, d->w, MC_MAX_ALGOS, got, perf);
}

mc_status mc_run(const mc_api *a, mc_handle h, const mc_conv *d, int pass, mc_enum algo, mc_enum math, uintptr_t x,
                 uintptr_t w, uintptr_t y, uintptr_t ws, size_t wsbytes, float beta, const char **call) {
	const float alpha = 1.0f; // float for fp32, fp16 and bf16 data alike
	// The math type Find measured the algorithm under: its kernel, its
	// workspace and its determinism are that pair's.
	mc_status r = a->cudnnSetConvolutionMathType(d->c, math);
	if (r != 0) {
		*call = "cudnnSetConvolutionMathType";
		return r;
	}
	switch (pass) {
	case 0:
		*call = "cudnnConvolutionForward";
		return a->cudnnConvolutionForward(h, &alpha, d->x, (const void *)x, d->w, (const void *)w, d->c, algo, (void *)ws,
		                                  wsbytes, &beta, d->y, (void *)y);
	case 1:
		*call = "cudnnConvolutionBackwardData";
		return a->cudnnConvolutionBackwardData(h, &alpha, d->w, (const void *)w, d->y, (const void *)y, d->c, algo,
		                                       (void *)ws, wsbytes, &beta, d->x, (void *)x);
	}
	*call = "cudnnConvolutionBackwardFilter";
	return a->cudnnConvolutionBackwardFilter(h, &alpha, d->x, (const void *)x, d->y, (const void *)y, d->c, algo,
	                                         (void *)ws, wsbytes, &beta, d->w, (void *)w);
}
