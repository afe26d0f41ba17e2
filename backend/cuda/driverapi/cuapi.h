// cuapi.h: the part of the CUDA driver API (cuda.h, CUDA 11.8) that memunet
// calls, declared here so that the gpu build needs no CUDA header: cuapi.c
// opens libcuda.so.1 at first use and looks each entry point up by the
// symbol cuda.h maps its name to (cuMemAlloc is cuMemAlloc_v2). Names are
// mu_ and MU_ so that a file may include cuda.h beside this one:
// TestDeclarationsMatchCUDAHeader does, where cuda.h is installed, and
// checks every type, constant, signature and symbol against it.
#pragma once
#include <stddef.h>

typedef unsigned int mu_result;          // CUresult (an enum of non-negative values: unsigned int)
typedef int mu_device;                   // CUdevice
typedef unsigned long long mu_deviceptr; // CUdeviceptr
typedef struct CUctx_st *mu_context;     // CUcontext
typedef struct CUmod_st *mu_module;      // CUmodule
typedef struct CUfunc_st *mu_function;   // CUfunction
typedef struct CUstream_st *mu_stream;   // CUstream
typedef struct CUevent_st *mu_event;     // CUevent
typedef unsigned long long mu_mem_handle; // CUmemGenericAllocationHandle

#ifdef MU_CUDA_H_STRUCTS // the header's own, for checking the signatures against it
typedef CUmemLocation mu_mem_location;
typedef CUmemAllocationProp mu_mem_alloc_prop;
typedef CUmemAccessDesc mu_mem_access_desc;
#else
typedef struct {
	unsigned int type; // CUmemLocationType
	int id;
} mu_mem_location; // CUmemLocation

typedef struct {
	unsigned int type;                 // CUmemAllocationType
	unsigned int requestedHandleTypes; // CUmemAllocationHandleType
	mu_mem_location location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} mu_mem_alloc_prop; // CUmemAllocationProp

typedef struct {
	mu_mem_location location;
	unsigned int flags; // CUmemAccess_flags
} mu_mem_access_desc; // CUmemAccessDesc
#endif

// The constants used, each with cuda.h's name after MU_.
#define MU_CONSTANTS(X)                                        \
	X(CUDA_SUCCESS, 0)                                         \
	X(CUDA_ERROR_OUT_OF_MEMORY, 2)                             \
	X(CUDA_ERROR_NOT_READY, 600)                               \
	X(CU_STREAM_NON_BLOCKING, 1)                               \
	X(CU_EVENT_DEFAULT, 0)                                     \
	X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16)            \
	X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75)        \
	X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76)        \
	X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102) \
	X(CU_JIT_ERROR_LOG_BUFFER, 5)                              \
	X(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 6)                   \
	X(CU_JIT_LOG_VERBOSE, 12)                                  \
	X(CU_MEMHOSTALLOC_PORTABLE, 1)                             \
	X(CU_MEM_ALLOCATION_TYPE_PINNED, 1)                        \
	X(CU_MEM_LOCATION_TYPE_DEVICE, 1)                          \
	X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 3)                   \
	X(CU_MEM_ALLOC_GRANULARITY_MINIMUM, 0)

#define MU_DEFINE_CONSTANT(name, value) MU_##name = value,
enum { MU_CONSTANTS(MU_DEFINE_CONSTANT) };

// MU_ENTRIES lists each entry point: its name in cuda.h, the symbol
// libcuda.so.1 exports it as (what cuda.h's macros make of the name for a
// 64-bit build without per-thread default streams), its parameters and
// the arguments that pass them on.
#define MU_ENTRIES(X)                                                                                            \
	X(cuGetErrorName, "cuGetErrorName", (mu_result r, const char **s), (r, s))                                  \
	X(cuGetErrorString, "cuGetErrorString", (mu_result r, const char **s), (r, s))                              \
	X(cuInit, "cuInit", (unsigned int flags), (flags))                                                          \
	X(cuDriverGetVersion, "cuDriverGetVersion", (int *v), (v))                                                  \
	X(cuDeviceGetCount, "cuDeviceGetCount", (int *n), (n))                                                      \
	X(cuDeviceGet, "cuDeviceGet", (mu_device * d, int ordinal), (d, ordinal))                                   \
	X(cuDeviceGetName, "cuDeviceGetName", (char *name, int len, mu_device d), (name, len, d))                  \
	X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *v, unsigned int attr, mu_device d), (v, attr, d))    \
	X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, mu_device d), (bytes, d))                      \
	X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (mu_context * c, mu_device d), (c, d))             \
	X(cuCtxSetCurrent, "cuCtxSetCurrent", (mu_context c), (c))                                                 \
	X(cuCtxSynchronize, "cuCtxSynchronize", (void), ())                                                        \
	X(cuModuleLoadData, "cuModuleLoadData", (mu_module * m, const void *image), (m, image))                   \
	X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                                                \
	  (mu_module * m, const void *image, unsigned int n, unsigned int *opts, void **vals), (m, image, n, opts, vals)) \
	X(cuModuleGetFunction, "cuModuleGetFunction", (mu_function * f, mu_module m, const char *name), (f, m, name)) \
	X(cuLaunchKernel, "cuLaunchKernel",                                                                        \
	  (mu_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,     \
	   unsigned int bz, unsigned int shared, mu_stream s, void **params, void **extra),                        \
	  (f, gx, gy, gz, bx, by, bz, shared, s, params, extra))                                                  \
	X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t * free, size_t *total), (free, total))                         \
	X(cuMemAlloc, "cuMemAlloc_v2", (mu_deviceptr * p, size_t bytes), (p, bytes))                               \
	X(cuMemFree, "cuMemFree_v2", (mu_deviceptr p), (p))                                                        \
	X(cuMemHostAlloc, "cuMemHostAlloc", (void **p, size_t bytes, unsigned int flags), (p, bytes, flags))       \
	X(cuMemFreeHost, "cuMemFreeHost", (void *p), (p))                                                          \
	X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (mu_deviceptr dst, const void *src, size_t n), (dst, src, n))          \
	X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void *dst, mu_deviceptr src, size_t n), (dst, src, n))                \
	X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", (mu_deviceptr dst, mu_deviceptr src, size_t n), (dst, src, n))         \
	X(cuMemsetD32, "cuMemsetD32_v2", (mu_deviceptr p, unsigned int v, size_t n), (p, v, n))                   \
	X(cuMemsetD16, "cuMemsetD16_v2", (mu_deviceptr p, unsigned short v, size_t n), (p, v, n))                 \
	X(cuMemAddressReserve, "cuMemAddressReserve",                                                              \
	  (mu_deviceptr * p, size_t bytes, size_t align, mu_deviceptr addr, unsigned long long flags),             \
	  (p, bytes, align, addr, flags))                                                                          \
	X(cuMemAddressFree, "cuMemAddressFree", (mu_deviceptr p, size_t bytes), (p, bytes))                       \
	X(cuMemCreate, "cuMemCreate",                                                                              \
	  (mu_mem_handle * h, size_t bytes, const mu_mem_alloc_prop *prop, unsigned long long flags),              \
	  (h, bytes, prop, flags))                                                                                 \
	X(cuMemRelease, "cuMemRelease", (mu_mem_handle h), (h))                                                    \
	X(cuMemMap, "cuMemMap", (mu_deviceptr p, size_t bytes, size_t off, mu_mem_handle h, unsigned long long flags), \
	  (p, bytes, off, h, flags))                                                                               \
	X(cuMemUnmap, "cuMemUnmap", (mu_deviceptr p, size_t bytes), (p, bytes))                                   \
	X(cuMemSetAccess, "cuMemSetAccess", (mu_deviceptr p, size_t bytes, const mu_mem_access_desc *desc, size_t n), \
	  (p, bytes, desc, n))                                                                                     \
	X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity",                                          \
	  (size_t * g, const mu_mem_alloc_prop *prop, unsigned int option), (g, prop, option))                       \
	X(cuStreamCreate, "cuStreamCreate", (mu_stream * s, unsigned int flags), (s, flags))                       \
	X(cuStreamDestroy, "cuStreamDestroy_v2", (mu_stream s), (s))                                               \
	X(cuStreamWaitEvent, "cuStreamWaitEvent", (mu_stream s, mu_event e, unsigned int flags), (s, e, flags))   \
	X(cuEventCreate, "cuEventCreate", (mu_event * e, unsigned int flags), (e, flags))                          \
	X(cuEventRecord, "cuEventRecord", (mu_event e, mu_stream s), (e, s))                                       \
	X(cuEventQuery, "cuEventQuery", (mu_event e), (e))                                                         \
	X(cuEventSynchronize, "cuEventSynchronize", (mu_event e), (e))                                             \
	X(cuEventElapsedTime, "cuEventElapsedTime", (float *ms, mu_event from, mu_event to), (ms, from, to))      \
	X(cuEventDestroy, "cuEventDestroy_v2", (mu_event e), (e))                                                  \
	X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (mu_deviceptr dst, const void *src, size_t n, mu_stream s),  \
	  (dst, src, n, s))                                                                                        \
	X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *dst, mu_deviceptr src, size_t n, mu_stream s),        \
	  (dst, src, n, s))

// mu_api holds the entry points, looked up by mu_load.
#define MU_FIELD(api, symbol, params, args) mu_result (*api) params;
typedef struct {
	MU_ENTRIES(MU_FIELD)
} mu_api;
