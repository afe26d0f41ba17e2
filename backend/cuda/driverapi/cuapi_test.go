//go:build gpu

package driverapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// cudaHeaderCheck includes cuda.h beside cuapi.h: the types' sizes and
// layouts, the constants, each entry point's signature (assigning the
// header's function to cuapi.h's pointer: -Werror refuses a mismatch) and
// the symbol cuda.h's macros make of each name.
const cudaHeaderCheck = `
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "cuapi.h"

#define STR(x) #x
#define XSTR(x) STR(x)
#define SAME_LAYOUT(mine, theirs, field) _Static_assert(offsetof(mine, field) == offsetof(theirs, field), #mine "." #field)

#ifndef MU_CUDA_H_STRUCTS
_Static_assert(sizeof(mu_result) == sizeof(CUresult), "CUresult");
_Static_assert(sizeof(mu_device) == sizeof(CUdevice), "CUdevice");
_Static_assert(sizeof(mu_deviceptr) == sizeof(CUdeviceptr), "CUdeviceptr");
_Static_assert(sizeof(mu_mem_handle) == sizeof(CUmemGenericAllocationHandle), "CUmemGenericAllocationHandle");
_Static_assert(sizeof(mu_mem_location) == sizeof(CUmemLocation), "CUmemLocation");
_Static_assert(sizeof(mu_mem_alloc_prop) == sizeof(CUmemAllocationProp), "CUmemAllocationProp");
_Static_assert(sizeof(mu_mem_access_desc) == sizeof(CUmemAccessDesc), "CUmemAccessDesc");
SAME_LAYOUT(mu_mem_location, CUmemLocation, id);
SAME_LAYOUT(mu_mem_alloc_prop, CUmemAllocationProp, requestedHandleTypes);
SAME_LAYOUT(mu_mem_alloc_prop, CUmemAllocationProp, location);
SAME_LAYOUT(mu_mem_alloc_prop, CUmemAllocationProp, win32HandleMetaData);
SAME_LAYOUT(mu_mem_alloc_prop, CUmemAllocationProp, allocFlags);
SAME_LAYOUT(mu_mem_access_desc, CUmemAccessDesc, flags);
#endif

#define SAME_CONSTANT(name, value) _Static_assert((long long)MU_##name == (long long)name, #name);
MU_CONSTANTS(SAME_CONSTANT)

#ifdef SIGNATURES
void signatures(mu_api *api);
void signatures(mu_api *api) {
#define SAME_SIGNATURE(name, symbol, params, args) api->name = name;
	MU_ENTRIES(SAME_SIGNATURE)
}
#else
int main(void) {
	int bad = 0;
#define SAME_SYMBOL(name, symbol, params, args) \
	if (strcmp(XSTR(name), symbol) != 0) { printf("%s is %s in cuda.h, looked up as %s\n", #name, XSTR(name), symbol); bad = 1; }
	MU_ENTRIES(SAME_SYMBOL)
	return bad;
}
#endif
`

// TestDeclarationsMatchCUDAHeader holds cuapi.h to cuda.h, where the CUDA
// header and a C compiler are installed (the gpu build itself needs
// neither).
func TestDeclarationsMatchCUDAHeader(t *testing.T) {
	var include string
	for _, dir := range []string{os.Getenv("CUDA_HOME") + "/include", "/usr/local/cuda/include", "/usr/include"} {
		if _, err := os.Stat(filepath.Join(dir, "cuda.h")); err == nil {
			include = dir
			break
		}
	}
	if include == "" {
		t.Skip("no cuda.h")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	pkg, _ := os.Getwd()
	dir := t.TempDir()
	src := filepath.Join(dir, "check.c")
	if err := os.WriteFile(src, []byte(cudaHeaderCheck), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"-std=c11", "-Wall", "-Werror", "-I", include, "-I", pkg}
	if out, err := exec.Command(cc, append(flags, "-DSIGNATURES", "-DMU_CUDA_H_STRUCTS", "-c", "-o", filepath.Join(dir, "check.o"), src)...).CombinedOutput(); err != nil {
		t.Fatalf("cuapi.h's types, constants or signatures differ from %s/cuda.h: %v\n%s", include, err, out)
	}
	bin := filepath.Join(dir, "check")
	if out, err := exec.Command(cc, append(flags, "-o", bin, src)...).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Errorf("cuapi.h's symbols differ from %s/cuda.h's: %v\n%s", include, err, out)
	}
}
