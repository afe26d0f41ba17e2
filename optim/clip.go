package optim

import (
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/model"
)

// ClipEps is clip_grad_norm_'s: the coefficient is max/(norm + ClipEps).
const ClipEps = 1e-6

// Grads are the gradients of the trainable parameters of params, in order:
// what the scaler unscales and ClipGradNorm clips.
func Grads(params []*model.Param) []backend.View {
	grads := make([]backend.View, 0, len(params))
	for _, p := range params {
		if p.Trainable {
			grads = append(grads, p.GradView())
		}
	}
	return grads
}

// ClipGradNorm is torch.nn.utils.clip_grad_norm_(params, maxNorm) (norm
// type 2, error_if_nonfinite=False) over grads, on b: it returns the
// global L2 norm of all of them together (as if concatenated; the sum of
// squares in float64, backend.Optimizer.SumSquares) and, where
// ClipCoef(norm, maxNorm) is below 1, multiplies every gradient by it
// (float32 multiplications, backend.Optimizer.UnscaleCheck). A norm of
// +Inf scales them by 0 (an infinity becomes NaN) and a NaN norm makes
// them NaN, as in PyTorch; the trainer skips such a step before it clips.
func ClipGradNorm(b backend.Optimizer, grads []backend.View, maxNorm float64) (norm float64) {
	norm = math.Sqrt(b.SumSquares(grads))
	if coef := ClipCoef(norm, maxNorm); !(coef >= 1) {
		b.UnscaleCheck(grads, coef)
	}
	return norm
}

// ClipCoef is the factor clip_grad_norm_ multiplies the gradients by for
// a global norm, in PyTorch's float32 steps: the norm rounded to float32,
// plus 1e-6, its reciprocal, times maxNorm (torch's max_norm / tensor),
// clamped to at most 1 (a NaN stays NaN). Where the norm is finite but
// beyond float32's range it is maxNorm/norm rounded once (PyTorch's
// float32 norm would be +Inf, and the factor 0).
func ClipCoef(norm, maxNorm float64) float32 {
	n32 := float32(norm)
	var coef float32
	if math.IsInf(float64(n32), 0) && !math.IsInf(norm, 0) {
		coef = float32(maxNorm / norm)
	} else {
		den := float32(n32 + float32(ClipEps))
		recip := float32(1 / den)
		coef = float32(recip * float32(maxNorm))
	}
	if coef > 1 {
		return 1
	}
	return coef
}
