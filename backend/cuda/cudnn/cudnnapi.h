// cudnnapi.h: the part of cuDNN's legacy convolution API (cudnn.h; the
// same in cuDNN 8.x and 9.x) that memunet calls, declared here so that the
// gpu build needs no cuDNN header: cudnnapi.c opens the library at run
// time and looks each entry point up by its name. Names are mc_ and MC_
// so that a file may include cudnn.h beside this one:
// TestDeclarationsMatchCUDNNHeader does, where cudnn.h is installed, and
// checks every type, constant, struct layout and signature against it.
#pragma once
#include <stddef.h>

typedef unsigned int mc_status;  // cudnnStatus_t (an enum of non-negative values: unsigned int)
typedef unsigned int mc_enum;    // cudnnDataType_t, cudnnTensorFormat_t, cudnnConvolutionMode_t, cudnnMathType_t, the algorithms
typedef struct cudnnContext *mc_handle;                  // cudnnHandle_t
typedef struct cudnnTensorStruct *mc_tensor;             // cudnnTensorDescriptor_t
typedef struct cudnnFilterStruct *mc_filter;             // cudnnFilterDescriptor_t
typedef struct cudnnConvolutionStruct *mc_convolution;   // cudnnConvolutionDescriptor_t
typedef struct CUstream_st *mc_stream;                   // cudaStream_t (the driver's CUstream)

// An algorithm's result from a Find call; the three passes' structs
// (cudnnConvolutionFwdAlgoPerf_t, ...BwdDataAlgoPerf_t,
// ...BwdFilterAlgoPerf_t) have this one layout.
#ifdef MC_CUDNN_H_STRUCTS // the header's own, for checking the signatures against it
typedef cudnnConvolutionFwdAlgoPerf_t mc_fwd_perf;
typedef cudnnConvolutionBwdDataAlgoPerf_t mc_bwd_data_perf;
typedef cudnnConvolutionBwdFilterAlgoPerf_t mc_bwd_filter_perf;
#else
typedef struct {
	mc_enum algo;        // the pass's algorithm enum
	mc_status status;    // CUDNN_STATUS_SUCCESS where the algorithm ran
	float time;          // milliseconds, as Find measured it
	size_t memory;       // workspace bytes
	mc_enum determinism; // cudnnDeterminism_t
	mc_enum mathType;    // cudnnMathType_t
	int reserved[3];
} mc_perf;
typedef mc_perf mc_fwd_perf;
typedef mc_perf mc_bwd_data_perf;
typedef mc_perf mc_bwd_filter_perf;
#endif

// The constants used, each with cudnn.h's name after MC_.
#define MC_CONSTANTS(X)                                  \
	X(CUDNN_STATUS_SUCCESS, 0)                           \
	X(CUDNN_DATA_FLOAT, 0)                               \
	X(CUDNN_DATA_HALF, 2)                                \
	X(CUDNN_DATA_BFLOAT16, 9)                            \
	X(CUDNN_TENSOR_NCHW, 0)                              \
	X(CUDNN_TENSOR_NHWC, 1)                              \
	X(CUDNN_CROSS_CORRELATION, 1)                        \
	X(CUDNN_DEFAULT_MATH, 0)                             \
	X(CUDNN_TENSOR_OP_MATH, 1)                           \
	X(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, 2)          \
	X(CUDNN_FMA_MATH, 3)                                 \
	X(CUDNN_NON_DETERMINISTIC, 0)                        \
	X(CUDNN_DETERMINISTIC, 1)                            \
	X(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, 8)               \
	X(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, 0)              \
	X(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, 6)          \
	X(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, 0)            \
	X(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, 3)            \
	X(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, 7)

#define MC_DEFINE_CONSTANT(name, value) MC_##name = value,
enum { MC_CONSTANTS(MC_DEFINE_CONSTANT) };

// MC_ENTRIES lists each entry point: its return type, its name (the
// library exports it under that name), its parameters and the arguments
// that pass them on.
#define MC_ENTRIES(X)                                                                                             \
	X(size_t, cudnnGetVersion, (void), ())                                                                        \
	X(size_t, cudnnGetCudartVersion, (void), ())                                                                  \
	X(const char *, cudnnGetErrorString, (mc_status s), (s))                                                      \
	X(mc_status, cudnnCreate, (mc_handle * h), (h))                                                               \
	X(mc_status, cudnnDestroy, (mc_handle h), (h))                                                                \
	X(mc_status, cudnnSetStream, (mc_handle h, mc_stream s), (h, s))                                              \
	X(mc_status, cudnnCreateTensorDescriptor, (mc_tensor * d), (d))                                               \
	X(mc_status, cudnnSetTensorNdDescriptor, (mc_tensor d, mc_enum type, int n, const int dims[], const int strides[]), \
	  (d, type, n, dims, strides))                                                                                \
	X(mc_status, cudnnDestroyTensorDescriptor, (mc_tensor d), (d))                                                \
	X(mc_status, cudnnCreateFilterDescriptor, (mc_filter * d), (d))                                               \
	X(mc_status, cudnnSetFilterNdDescriptor, (mc_filter d, mc_enum type, mc_enum format, int n, const int dims[]), \
	  (d, type, format, n, dims))                                                                                 \
	X(mc_status, cudnnDestroyFilterDescriptor, (mc_filter d), (d))                                                \
	X(mc_status, cudnnCreateConvolutionDescriptor, (mc_convolution * d), (d))                                     \
	X(mc_status, cudnnSetConvolutionNdDescriptor,                                                                 \
	  (mc_convolution d, int n, const int pad[], const int stride[], const int dilation[], mc_enum mode, mc_enum type), \
	  (d, n, pad, stride, dilation, mode, type))                                                                  \
	X(mc_status, cudnnSetConvolutionMathType, (mc_convolution d, mc_enum math), (d, math))                        \
	X(mc_status, cudnnDestroyConvolutionDescriptor, (mc_convolution d), (d))                                      \
	X(mc_status, cudnnGetConvolutionForwardAlgorithmMaxCount, (mc_handle h, int *n), (h, n))                      \
	X(mc_status, cudnnGetConvolutionBackwardDataAlgorithmMaxCount, (mc_handle h, int *n), (h, n))                 \
	X(mc_status, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount, (mc_handle h, int *n), (h, n))               \
	X(mc_status, cudnnFindConvolutionForwardAlgorithm,                                                            \
	  (mc_handle h, const mc_tensor xd, const mc_filter wd, const mc_convolution cd, const mc_tensor yd,           \
	   const int want, int *got, mc_fwd_perf *perf),                                                               \
	  (h, xd, wd, cd, yd, want, got, perf))                                                                       \
	X(mc_status, cudnnFindConvolutionBackwardDataAlgorithm,                                                       \
	  (mc_handle h, const mc_filter wd, const mc_tensor dyd, const mc_convolution cd, const mc_tensor dxd,         \
	   const int want, int *got, mc_bwd_data_perf *perf),                                                          \
	  (h, wd, dyd, cd, dxd, want, got, perf))                                                                     \
	X(mc_status, cudnnFindConvolutionBackwardFilterAlgorithm,                                                     \
	  (mc_handle h, const mc_tensor xd, const mc_tensor dyd, const mc_convolution cd, const mc_filter dwd,         \
	   const int want, int *got, mc_bwd_filter_perf *perf),                                                        \
	  (h, xd, dyd, cd, dwd, want, got, perf))                                                                     \
	X(mc_status, cudnnFindConvolutionForwardAlgorithmEx,                                                          \
	  (mc_handle h, const mc_tensor xd, const void *x, const mc_filter wd, const void *w, const mc_convolution cd, \
	   const mc_tensor yd, void *y, const int want, int *got, mc_fwd_perf *perf, void *ws, size_t wsBytes),        \
	  (h, xd, x, wd, w, cd, yd, y, want, got, perf, ws, wsBytes))                                                 \
	X(mc_status, cudnnFindConvolutionBackwardDataAlgorithmEx,                                                     \
	  (mc_handle h, const mc_filter wd, const void *w, const mc_tensor dyd, const void *dy, const mc_convolution cd, \
	   const mc_tensor dxd, void *dx, const int want, int *got, mc_bwd_data_perf *perf, void *ws, size_t wsBytes), \
	  (h, wd, w, dyd, dy, cd, dxd, dx, want, got, perf, ws, wsBytes))                                             \
	X(mc_status, cudnnFindConvolutionBackwardFilterAlgorithmEx,                                                   \
	  (mc_handle h, const mc_tensor xd, const void *x, const mc_tensor dyd, const void *dy, const mc_convolution cd, \
	   const mc_filter dwd, void *dw, const int want, int *got, mc_bwd_filter_perf *perf, void *ws, size_t wsBytes), \
	  (h, xd, x, dyd, dy, cd, dwd, dw, want, got, perf, ws, wsBytes))                                             \
	X(mc_status, cudnnGetConvolutionForwardWorkspaceSize,                                                         \
	  (mc_handle h, const mc_tensor xd, const mc_filter wd, const mc_convolution cd, const mc_tensor yd, mc_enum algo, \
	   size_t *bytes),                                                                                             \
	  (h, xd, wd, cd, yd, algo, bytes))                                                                           \
	X(mc_status, cudnnGetConvolutionBackwardDataWorkspaceSize,                                                    \
	  (mc_handle h, const mc_filter wd, const mc_tensor dyd, const mc_convolution cd, const mc_tensor dxd, mc_enum algo, \
	   size_t *bytes),                                                                                             \
	  (h, wd, dyd, cd, dxd, algo, bytes))                                                                         \
	X(mc_status, cudnnGetConvolutionBackwardFilterWorkspaceSize,                                                  \
	  (mc_handle h, const mc_tensor xd, const mc_tensor dyd, const mc_convolution cd, const mc_filter dwd, mc_enum algo, \
	   size_t *bytes),                                                                                             \
	  (h, xd, dyd, cd, dwd, algo, bytes))                                                                         \
	X(mc_status, cudnnConvolutionForward,                                                                         \
	  (mc_handle h, const void *alpha, const mc_tensor xd, const void *x, const mc_filter wd, const void *w,         \
	   const mc_convolution cd, mc_enum algo, void *ws, size_t wsBytes, const void *beta, const mc_tensor yd, void *y), \
	  (h, alpha, xd, x, wd, w, cd, algo, ws, wsBytes, beta, yd, y))                                               \
	X(mc_status, cudnnConvolutionBackwardData,                                                                    \
	  (mc_handle h, const void *alpha, const mc_filter wd, const void *w, const mc_tensor dyd, const void *dy,       \
	   const mc_convolution cd, mc_enum algo, void *ws, size_t wsBytes, const void *beta, const mc_tensor dxd, void *dx), \
	  (h, alpha, wd, w, dyd, dy, cd, algo, ws, wsBytes, beta, dxd, dx))                                           \
	X(mc_status, cudnnConvolutionBackwardFilter,                                                                  \
	  (mc_handle h, const void *alpha, const mc_tensor xd, const void *x, const mc_tensor dyd, const void *dy,       \
	   const mc_convolution cd, mc_enum algo, void *ws, size_t wsBytes, const void *beta, const mc_filter dwd, void *dw), \
	  (h, alpha, xd, x, dyd, dy, cd, algo, ws, wsBytes, beta, dwd, dw))

// mc_api holds one library's entry points, looked up by mc_open.
#define MC_FIELD(ret, name, params, args) ret (*name) params;
typedef struct {
	MC_ENTRIES(MC_FIELD)
} mc_api;
