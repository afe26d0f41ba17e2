// Package cudnn is NVIDIA's cuDNN as a convolution provider for the CUDA
// backend (config key cuda.conv): where the library is found and which of
// its algorithms a layer may use.
//
// The loader (the build with -tags gpu only) opens the library at run
// time with dlopen, as backend/cuda/driverapi opens libcuda.so.1, through
// the few types and entry points cudnnapi.h declares by hand, so building
// needs no cuDNN header and the default build stays pure Go. It looks in
// the places Places lists, in order: the file MEMUNET_CUDNN names (and
// only there, where it is set); libcudnn.so.9, then libcudnn.so.8, on the
// loader path; the copy a PyTorch wheel installs in a Python
// site-packages folder (nvidia/cudnn/lib). It refuses a library without
// every declared entry point (ErrNotCUDNN) and one older than MinVersion
// (ErrTooOld); where none is usable its *LoadError lists every place
// tried and the fix. Loading needs no GPU; a handle does (ErrNoDriver
// where the driver cannot start).
//
// It lives beside driverapi rather than in it: cuDNN is optional (cuda.conv
// memunet never loads it, auto goes on without it), it is its own library
// with its own errors, and the algorithm policy (policy.go) is pure Go that
// the default build tests.
//
// The policy chooses, per layer and pass, the fastest algorithm cuDNN's
// Find results list that ran, fits the workspace budget (cuda.workspace)
// and, by default (cuda.deterministic), is deterministic: never backward
// data ALGO_0 or backward filter ALGO_0 or ALGO_3, which sum with atomic
// adds. Find times each algorithm under the descriptor's math type and the
// default one: a choice is the pair (Algorithm), run under that math type,
// and exact fp32 admits FMA rows only (the default one takes TF32).
// testdata holds the tables its tests hold it to: a hand-written one
// until a device run records cuDNN's own.
//
// Handle.Find runs cuDNN's own Find for one pass of a convolution (every
// algorithm timed on buffers cuDNN allocates) and gives the rows a Table
// records (Handle.Record); backend/cuda/driverapi's
// TestRecordAlgorithmTables records the seed UNet's tables on a GPU, for
// testdata. FindCache keeps Find's rows on disk per GPU and library, so
// every process on a machine chooses alike.
//
// Handle.Run runs one pass of a convolution with a chosen algorithm on
// device memory (Buffers), on descriptors made once per shape and
// precision (2D or 3D, padding and stride per axis); Provider is a handle
// as the CUDA backend's ConvLibrary, each call with the device's context
// current. The backend's use of it (the plan, the workspace from the
// pool) is tested on the emulated device against a stand-in, the calls
// here against a stub library. None of it has run on a GPU yet.
package cudnn
