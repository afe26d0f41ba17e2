// gemm.cu compiled for the host.
#include "cudashim.h"
#include "gemm_cu.h" // kernels/gemm.cu, copied by go generate

// emu_gemm calls kernel k (backend/cuda's Kernel order) with its arguments.
extern "C" void emu_gemm(int k, const uint64_t *a) {
	switch (k) {
	case 29: k_conv(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]); break;
	case 30: k_conv_back_data(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]); break;
	case 31: k_conv_back_weight(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]); break;
	case 32: k_up_conv(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]); break;
	case 33: k_up_conv_back_data(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
	case 34: k_up_conv_back_weight(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]); break;
	case 35: k_split_sum(a[0], a[1], a[2], a[3]); break;
	}
}
