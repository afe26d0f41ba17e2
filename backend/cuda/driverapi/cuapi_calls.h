// cuapi_calls.h: what the Go side calls: mu_<entry point> for each of
// MU_ENTRIES (through the table mu_load filled), and cuapi.c's helpers.
#pragma once
#include "cuapi.h"

extern mu_api mu;

#define MU_WRAP(api, symbol, params, args) \
	static inline mu_result mu_##api params { return mu.api args; }
MU_ENTRIES(MU_WRAP)

// MU_MAX_ARGS bounds a kernel's parameters (memunet's take at most 14).
#define MU_MAX_ARGS 32

int mu_load(char *err, size_t errlen);
size_t mu_granularity(mu_device dev);
// mu_map backs n pages at p, each its own allocation, released at once (the
// mapping keeps the memory until it is unmapped), and makes them readable
// and writable from dev; on failure it unmaps what it mapped.
mu_result mu_map(mu_device dev, mu_deviceptr p, size_t page, size_t n);
// mu_unmap unmaps n pages at p, a mapping each, and returns the first error.
mu_result mu_unmap(mu_deviceptr p, size_t page, size_t n);
// mu_launch runs f on gx*gy blocks of threads threads on the default
// stream, each of its n parameters 64 bits.
mu_result mu_launch(mu_function f, unsigned int gx, unsigned int gy, unsigned int threads, const unsigned long long *args, int n);
// mu_load_module loads a module image (a fatbin or PTX); where that fails
// it tries again with the JIT's error log into log.
mu_result mu_load_module(mu_module *m, const void *image, char *log, size_t logsize);
