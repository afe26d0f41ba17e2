// ops.cu compiled for the host.
#include "cudashim.h"
#include "ops_cu.h" // kernels/ops.cu, copied by go generate

#define D(i) emu_double(a[i])

// emu_ops calls kernel k (backend/cuda's Kernel order) with its arguments.
extern "C" void emu_ops(int k, const uint64_t *a) {
	switch (k) {
	case 0: k_convert(a[0], a[1], a[2], a[3], a[4]); break;
	case 1: k_relu(a[0], a[1], a[2], a[3]); break;
	case 2: k_relu_back(a[0], a[1], a[2], a[3], a[4]); break;
	case 3: k_max_pool2(a[0], a[1], a[2], a[3], a[4], a[5]); break;
	case 4: k_max_pool2_back(a[0], a[1], a[2], a[3], a[4], a[5]); break;
	case 5: k_upsample2(a[0], a[1], a[2], a[3], a[4]); break;
	case 6: k_upsample2_back(a[0], a[1], a[2], a[3], a[4]); break;
	case 7: k_concat(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
	case 8: k_split(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
	case 9: k_add(a[0], a[1], a[2], a[3]); break;
	case 10: k_batch_norm(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], D(10), D(11), a[12], a[13]); break;
	case 11: k_batch_norm_eval(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], D(9)); break;
	case 12: k_batch_norm_back(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]); break;
	case 13: k_group_norm(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], D(9), a[10]); break;
	case 14: k_group_norm_params_back(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]); break;
	case 15: k_group_norm_back(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]); break;
	case 16: k_cross_entropy(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
	case 17: k_cross_entropy_back(a[0], a[1], a[2], a[3], a[4], a[5], D(6)); break;
	case 18: k_confusion(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
	case 19: k_argmax(a[0], a[1], a[2], a[3], a[4], a[5]); break;
	case 20: k_adam(a[0], a[1], a[2], a[3], a[4], D(5), D(6), D(7), D(8), D(9), D(10), D(11), D(12), D(13)); break;
	case 21: k_unscale_check(a[0], a[1], D(2), a[3]); break;
	case 22: k_bias_grad(a[0], a[1], a[2], a[3], a[4]); break;
	case 23: k_sgd(a[0], a[1], a[2], a[3], D(4), D(5), D(6), D(7), a[8], a[9]); break;
	case 24: k_rmsprop(a[0], a[1], a[2], a[3], a[4], D(5), D(6), D(7), D(8), D(9), D(10)); break;
	case 25: k_loss_sums(a[0], a[1], a[2], a[3], a[4], a[5], a[6], D(7)); break;
	case 26: k_loss_back(a[0], a[1], a[2], a[3], a[4], a[5], a[6], D(7)); break;
	case 27: k_relu_mask(a[0], a[1], a[2], a[3]); break;
	case 28: k_relu_back_mask(a[0], a[1], a[2], a[3], a[4]); break;
	}
}
