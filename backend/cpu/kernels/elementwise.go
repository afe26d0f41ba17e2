package kernels

import "math"

// Elementwise passes of the norms and ReLU: AVX2 where the CPU has it
// (elementwise_amd64.s, 8 values a step, the tail in Go), pure Go
// otherwise. Both do the same float32 operations in the same order (a
// multiply and an add, never fused), so they agree bit for bit.

// elementwiseImpl is one implementation of the passes below.
type elementwiseImpl struct {
	name         string
	relu         func(y, x []float32)
	reluBackward func(dx, dy, y []float32)
	affine       func(y, x []float32, scale, shift float32)
	normGrad     func(dx, g, x []float32, mu, a, b, c float32)
}

func genericElementwise() elementwiseImpl {
	return elementwiseImpl{name: "go", relu: reluGo, reluBackward: reluBackwardGo, affine: affineGo, normGrad: normGradGo}
}

// bestElementwise is the fastest implementation this CPU supports.
func bestElementwise() elementwiseImpl {
	if e, ok := asmElementwise(); ok {
		return e
	}
	return genericElementwise()
}

// ReLU sets y[i] = max(x[i], 0): negative values and -0 become +0, NaN
// passes through (PyTorch's relu). y and x may be the same slice.
func ReLU(y, x []float32) { bestElementwise().relu(y[:len(x)], x) }

// ReLUBackward sets dx[i] = dy[i] where y[i] > 0 (positive, non-zero, not
// NaN), else +0. dx may be dy.
func ReLUBackward(dx, dy, y []float32) {
	bestElementwise().reluBackward(dx[:len(y)], dy[:len(y)], y)
}

// Affine sets y[i] = x[i]*scale + shift (rounded after the multiply and
// after the add). y may be x.
func Affine(y, x []float32, scale, shift float32) {
	bestElementwise().affine(y[:len(x)], x, scale, shift)
}

// NormGrad sets dx[i] = a*g[i] + b*(x[i]-mu) + c, evaluated left to right
// with float32 rounding after each operation. dx may be g.
func NormGrad(dx, g, x []float32, mu, a, b, c float32) {
	bestElementwise().normGrad(dx[:len(g)], g, x[:len(g)], mu, a, b, c)
}

func reluGo(y, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		b := math.Float32bits(v)
		keep := ^uint32(int32(b)>>31) | uint32((int64(0xff800000)-int64(b))>>63)
		y[i] = math.Float32frombits(b & keep)
	}
}

func reluBackwardGo(dx, dy, y []float32) {
	dy, dx = dy[:len(y)], dx[:len(y)]
	for i, v := range y {
		keep := uint32((int64(math.Float32bits(v)-1) - 0x7f800000) >> 63)
		dx[i] = math.Float32frombits(math.Float32bits(dy[i]) & keep)
	}
}

func affineGo(y, x []float32, scale, shift float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = v*scale + shift
	}
}

func normGradGo(dx, g, x []float32, mu, a, b, c float32) {
	x = x[:len(g)]
	dx = dx[:len(g)]
	for i, v := range g {
		dx[i] = a*v + b*(x[i]-mu) + c
	}
}
