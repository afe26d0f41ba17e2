//go:build gpu

package cudnn

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cudnnHeaderCheck includes cudnn.h beside cudnnapi.h: the types' sizes,
// the algorithm results' layout, the constants and each entry point's
// signature (assigning the header's function to cudnnapi.h's pointer:
// -Werror refuses a mismatch).
const cudnnHeaderCheck = `
#include <cudnn.h>
#include <stddef.h>
#include "cudnnapi.h"

#define SAME_SIZE(mine, theirs) _Static_assert(sizeof(mine) == sizeof(theirs), #theirs);
#define SAME_FIELD(mine, theirs, field) _Static_assert(offsetof(mine, field) == offsetof(theirs, field), #theirs "." #field);

#ifndef MC_CUDNN_H_STRUCTS
SAME_SIZE(mc_status, cudnnStatus_t)
SAME_SIZE(mc_enum, cudnnDataType_t)
SAME_SIZE(mc_enum, cudnnTensorFormat_t)
SAME_SIZE(mc_enum, cudnnConvolutionMode_t)
SAME_SIZE(mc_enum, cudnnMathType_t)
SAME_SIZE(mc_enum, cudnnDeterminism_t)
SAME_SIZE(mc_enum, cudnnConvolutionFwdAlgo_t)
SAME_SIZE(mc_enum, cudnnConvolutionBwdDataAlgo_t)
SAME_SIZE(mc_enum, cudnnConvolutionBwdFilterAlgo_t)
#define SAME_PERF(theirs)                    \
	SAME_SIZE(mc_perf, theirs)               \
	SAME_FIELD(mc_perf, theirs, algo)        \
	SAME_FIELD(mc_perf, theirs, status)      \
	SAME_FIELD(mc_perf, theirs, time)        \
	SAME_FIELD(mc_perf, theirs, memory)      \
	SAME_FIELD(mc_perf, theirs, determinism) \
	SAME_FIELD(mc_perf, theirs, mathType)    \
	SAME_FIELD(mc_perf, theirs, reserved)
SAME_PERF(cudnnConvolutionFwdAlgoPerf_t)
SAME_PERF(cudnnConvolutionBwdDataAlgoPerf_t)
SAME_PERF(cudnnConvolutionBwdFilterAlgoPerf_t)
#endif

#define SAME_CONSTANT(name, value) _Static_assert((long long)MC_##name == (long long)name, #name);
MC_CONSTANTS(SAME_CONSTANT)

#ifdef SIGNATURES
void signatures(mc_api *api);
void signatures(mc_api *api) {
#define SAME_SIGNATURE(ret, name, params, args) api->name = name;
	MC_ENTRIES(SAME_SIGNATURE)
}
#endif
`

// includeDirs are where cudnn.h and the CUDA runtime's headers it includes
// may be: MEMUNET_CUDNN_INCLUDE's folders (colon-separated), CUDNN_HOME's
// and CUDA_HOME's, the system's, and a PyTorch wheel's.
func includeDirs() []string {
	dirs := strings.Split(os.Getenv("MEMUNET_CUDNN_INCLUDE"), ":")
	for _, env := range []string{"CUDNN_HOME", "CUDA_HOME"} {
		if p := os.Getenv(env); p != "" {
			dirs = append(dirs, filepath.Join(p, "include"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/include", "/usr/include", "/usr/include/x86_64-linux-gnu")
	for _, sp := range SitePackages(os.Getenv) {
		dirs = append(dirs, filepath.Join(sp, "nvidia", "cudnn", "include"), filepath.Join(sp, "nvidia", "cuda_runtime", "include"))
	}
	var found []string
	for _, d := range dirs {
		if st, err := os.Stat(d); d != "" && err == nil && st.IsDir() {
			found = append(found, d)
		}
	}
	return found
}

// TestDeclarationsMatchCUDNNHeader holds cudnnapi.h to cudnn.h, where the
// cuDNN header, the CUDA runtime's headers and a C compiler are installed
// (the gpu build itself needs none of them).
func TestDeclarationsMatchCUDNNHeader(t *testing.T) {
	dirs := includeDirs()
	has := func(h string) bool {
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, h)); err == nil {
				return true
			}
		}
		return false
	}
	if !has("cudnn.h") || !has("cuda_runtime_api.h") {
		t.Skip("no cudnn.h with the CUDA runtime's headers (MEMUNET_CUDNN_INCLUDE may name their folders)")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	pkg, _ := os.Getwd()
	dir := t.TempDir()
	src := filepath.Join(dir, "check.c")
	if err := os.WriteFile(src, []byte(cudnnHeaderCheck), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"-std=c11", "-Wall", "-Werror", "-c", "-I", pkg}
	for _, d := range dirs {
		flags = append(flags, "-I", d)
	}
	for _, extra := range [][]string{nil, {"-DSIGNATURES", "-DMC_CUDNN_H_STRUCTS"}} {
		args := append(append(append([]string{}, flags...), extra...), "-o", filepath.Join(dir, "check.o"), src)
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Errorf("cudnnapi.h differs from cudnn.h (%v): %v\n%s", extra, err, out)
		}
	}
}
