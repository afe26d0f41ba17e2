//go:build gpu

// cuapi.c: libcuda.so.1 opened at first use, and the few calls that are
// easier to make from C (several driver calls in a row, arrays of
// pointers).
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuapi.h"
#include "cuapi_calls.h"

mu_api mu;

// mu_load opens the driver library and looks up every entry point; on
// failure it writes why into err and returns -1. Called once (Go's
// sync.Once).
int mu_load(char *err, size_t errlen) {
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
#define MU_LOOKUP(api, symbol, params, args)                                                                    \
	if (!(*(void **)&mu.api = dlsym(lib, symbol))) {                                                        \
		snprintf(err, errlen, "libcuda.so.1 has no %s: the NVIDIA driver is older than CUDA 11.8 needs", symbol); \
		return -1;                                                                                       \
	}
	MU_ENTRIES(MU_LOOKUP)
	return 0;
}

static mu_mem_alloc_prop mu_prop(mu_device dev) {
	mu_mem_alloc_prop prop;
	memset(&prop, 0, sizeof prop);
	prop.type = MU_CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = MU_CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	return prop;
}

size_t mu_granularity(mu_device dev) {
	int vmm = 0;
	size_t g = 0;
	mu_mem_alloc_prop prop = mu_prop(dev);
	if (mu.cuDeviceGetAttribute(&vmm, MU_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != 0 || !vmm ||
	    mu.cuMemGetAllocationGranularity(&g, &prop, MU_CU_MEM_ALLOC_GRANULARITY_MINIMUM) != 0) {
		return 0;
	}
	return g;
}

mu_result mu_map(mu_device dev, mu_deviceptr p, size_t page, size_t n) {
	mu_mem_alloc_prop prop = mu_prop(dev);
	mu_result r = 0;
	size_t i;
	for (i = 0; i < n; i++) {
		mu_mem_handle h;
		if ((r = mu.cuMemCreate(&h, page, &prop, 0)) != 0) {
			break;
		}
		r = mu.cuMemMap(p + i * page, page, 0, h, 0);
		mu.cuMemRelease(h);
		if (r != 0) {
			break;
		}
	}
	if (r == 0) {
		mu_mem_access_desc access;
		memset(&access, 0, sizeof access);
		access.location.type = MU_CU_MEM_LOCATION_TYPE_DEVICE;
		access.location.id = dev;
		access.flags = MU_CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		if ((r = mu.cuMemSetAccess(p, n * page, &access, 1)) == 0) {
			return r;
		}
	}
	for (size_t j = 0; j < i; j++) {
		mu.cuMemUnmap(p + j * page, page);
	}
	return r;
}

mu_result mu_unmap(mu_deviceptr p, size_t page, size_t n) {
	mu_result first = 0;
	for (size_t i = 0; i < n; i++) {
		mu_result r = mu.cuMemUnmap(p + i * page, page);
		if (first == 0) {
			first = r;
		}
	}
	return first;
}

mu_result mu_launch(mu_function f, unsigned int gx, unsigned int gy, unsigned int threads, const unsigned long long *args, int n) {
	void *params[MU_MAX_ARGS];
	if (n > MU_MAX_ARGS) {
		return 1; // CUDA_ERROR_INVALID_VALUE
	}
	for (int i = 0; i < n; i++) {
		params[i] = (void *)&args[i];
	}
	return mu.cuLaunchKernel(f, gx, gy, 1, threads, 1, 1, 0, 0, params, 0);
}

mu_result mu_load_module(mu_module *m, const void *image, char *log, size_t logsize) {
	mu_result r = mu.cuModuleLoadData(m, image);
	if (r == 0) {
		return r;
	}
	// Again, to get the JIT's log of what failed.
	unsigned int opts[3] = {MU_CU_JIT_ERROR_LOG_BUFFER, MU_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, MU_CU_JIT_LOG_VERBOSE};
	void *vals[3] = {log, (void *)logsize, (void *)1};
	log[0] = 0;
	mu_result again = mu.cuModuleLoadDataEx(m, image, 3, opts, vals);
	return again == 0 ? 0 : r;
}
