package kernels

import "math"

// Elementwise passes of the norms and ReLU: AVX2 where the CPU has it
// (elementwise_amd64.s, 8 values a step, the tail in Go), pure Go
// otherwise. Both do the same float32 operations in the same order (a
// multiply and an add, never fused), so they agree bit for bit.

// elementwiseImpl is one implementation of the passes below: with avx2,
// each pass's assembly wrapper (the *Asm functions) takes the longest
// prefix it can and returns its length, and the Go version does the rest;
// without, Go does all.
type elementwiseImpl struct {
	name string
	avx2 bool
}

func genericElementwise() elementwiseImpl { return elementwiseImpl{name: "go"} }

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

// AffineReLUMask is Affine, ReLU of its result and, unless mask is nil,
// ReLUMask of that, in one pass: y[i] = max(x[i]*scale + shift, 0) and
// bit i%8 of mask[i/8] set where y[i] > 0; the same bits as the three.
// y may be x.
func AffineReLUMask(y, x []float32, mask []uint8, scale, shift float32) {
	bestElementwise().affineReLUMask(y[:len(x)], x, mask, scale, shift)
}

// AddReLUBackMaskGrad is ReLUBackwardMask(dx, dy, mask) then AddGrad(dx,
// x, mu) in one pass: the same bits in dx and the sums (dx may be dy).
func (s *Sums) AddReLUBackMaskGrad(dx, dy, x []float32, mask []uint8, mu float64) {
	bestElementwise().reluBackMaskGradSums(dx[:len(dy)], dy, x[:len(dy)], mask, mu, &s.c)
}

func (e elementwiseImpl) affineReLUMask(y, x []float32, mask []uint8, scale, shift float32) {
	n := 0
	if e.avx2 {
		n = affineReLUMaskAsm(y, x, mask, scale, shift)
	}
	if mask != nil {
		mask = mask[n/8:]
	}
	affineReLUMaskGo(y[n:], x[n:], mask, scale, shift)
}

func (e elementwiseImpl) reluBackMaskGradSums(dx, dy, x []float32, mask []uint8, mu float64, c *chains) {
	n := 0
	if e.avx2 {
		n = reluBackMaskGradSumsAsm(dx, dy, x, mask, mu, c)
	}
	// The rest as the two passes do it, in the same chains.
	reluBackMaskGo(dx[n:], dy[n:], mask[n/8:])
	gradSumsGo(dx[n:], x[n:], mu, &c.a, &c.b)
}

// affineReLUMaskGo is affineGo, reluGo and reluMaskGo of each value.
func affineReLUMaskGo(y, x []float32, mask []uint8, scale, shift float32) {
	y = y[:len(x)]
	for i, v := range x {
		a := float32(v*scale) + shift // rounded after the multiply, never fused
		b := math.Float32bits(a)
		keep := ^uint32(int32(b)>>31) | uint32((int64(0xff800000)-int64(b))>>63)
		y[i] = math.Float32frombits(b & keep)
	}
	if mask != nil {
		reluMaskGo(mask, y)
	}
}

// Add sets z[i] = x[i] + y[i]; z may be x or y.
func Add(z, x, y []float32) { bestElementwise().add(z[:len(x)], x, y[:len(x)]) }

func (e elementwiseImpl) add(z, x, y []float32) {
	n := 0
	if e.avx2 {
		n = addAsm(z, x, y)
	}
	addGo(z[n:len(x)], x[n:], y[n:len(x)])
}

func addGo(z, x, y []float32) {
	z, y = z[:len(x)], y[:len(x)]
	for i, v := range x {
		z[i] = v + y[i]
	}
}

func (e elementwiseImpl) relu(y, x []float32) {
	n := 0
	if e.avx2 {
		n = reluAsm(y, x)
	}
	reluGo(y[n:len(x)], x[n:])
}

func (e elementwiseImpl) reluBackward(dx, dy, y []float32) {
	n := 0
	if e.avx2 {
		n = reluBackwardAsm(dx, dy, y)
	}
	reluBackwardGo(dx[n:len(y)], dy[n:len(y)], y[n:])
}

func (e elementwiseImpl) affine(y, x []float32, scale, shift float32) {
	n := 0
	if e.avx2 {
		n = affineAsm(y, x, scale, shift)
	}
	affineGo(y[n:len(x)], x[n:], scale, shift)
}

func (e elementwiseImpl) normGrad(dx, g, x []float32, mu, a, b, c float32) {
	n := 0
	if e.avx2 {
		n = normGradAsm(dx, g, x, mu, a, b, c)
	}
	normGradGo(dx[n:len(g)], g[n:], x[n:len(g)], mu, a, b, c)
}

func (e elementwiseImpl) relu16(y, x []uint16, inf uint16) {
	n := 0
	if e.avx2 {
		n = relu16Asm(y, x, inf)
	}
	relu16Go(y[n:len(x)], x[n:], inf)
}

func (e elementwiseImpl) reluBack16(dx, dy, y []uint16, inf uint16) {
	n := 0
	if e.avx2 {
		n = reluBack16Asm(dx, dy, y, inf)
	}
	reluBack16Go(dx[n:len(y)], dy[n:len(y)], y[n:], inf)
}

// chains is the 16 partial sums of two float64 sums.
type chains struct{ a, b [16]float64 }

// shiftedSums adds xs's terms into c. The assembly's prefix is a multiple
// of 16, so the Go rest goes on in the same chains.
func (e elementwiseImpl) shiftedSums(xs []float32, k float64, c *chains) {
	n := 0
	if e.avx2 {
		n = shiftedSumsAsm(xs, k, c)
	}
	shiftedSumsGo(xs[n:], k, &c.a, &c.b)
}

// gradSums adds g's and x's terms into c, as shiftedSums.
func (e elementwiseImpl) gradSums(g, x []float32, mu float64, c *chains) {
	n := 0
	if e.avx2 {
		n = gradSumsAsm(g, x, mu, c)
	}
	gradSumsGo(g[n:], x[n:len(g)], mu, &c.a, &c.b)
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

// ShiftedSums returns s = Σ(x-k) and q = Σ(x-k)² in float64. With k a value
// of xs (the first, say), the variance q/n - (s/n)² does not suffer the
// cancellation of a plain sum of squares when |mean| >> std. The sums run
// in 16 interleaved chains (element i in chain i%16), reduced pairwise:
// the add latency, not the memory, would bound fewer.
func ShiftedSums(xs []float32, k float64) (s, q float64) {
	var c Sums
	c.AddShifted(xs, k)
	return c.Result()
}

// GradSums returns Σg and Σg·(x-mu) in float64 over matching g and x, in
// chains as ShiftedSums.
func GradSums(g, x []float32, mu float64) (sg, sgx float64) {
	var c Sums
	c.AddGrad(g, x, mu)
	return c.Result()
}

// Sums are the chains of ShiftedSums or GradSums carried from one block of
// a row to the next: a row added block by block, each block but the last a
// multiple of 16 values long, gives the bits of one call on the whole row.
type Sums struct{ c chains }

// AddShifted adds xs's terms of ShiftedSums.
func (s *Sums) AddShifted(xs []float32, k float64) { bestElementwise().shiftedSums(xs, k, &s.c) }

// AddGrad adds g's and x's terms of GradSums.
func (s *Sums) AddGrad(g, x []float32, mu float64) {
	bestElementwise().gradSums(g, x[:len(g)], mu, &s.c)
}

// Result is the two sums, each reduced pairwise.
func (s *Sums) Result() (float64, float64) { return reduce16(&s.c.a), reduce16(&s.c.b) }

// reduce16 sums the chains pairwise.
func reduce16(c *[16]float64) float64 {
	var h [8]float64
	for i := range h {
		h[i] = c[2*i] + c[2*i+1]
	}
	return ((h[0] + h[1]) + (h[2] + h[3])) + ((h[4] + h[5]) + (h[6] + h[7]))
}

func shiftedSumsGo(xs []float32, k float64, s, q *[16]float64) {
	for i, v := range xs {
		d := float64(v) - k
		s[i%16] += d
		q[i%16] += d * d
	}
}

func gradSumsGo(g, x []float32, mu float64, a, b *[16]float64) {
	x = x[:len(g)]
	for i, v := range g {
		gv := float64(v)
		a[i%16] += gv
		b[i%16] += gv * (float64(x[i]) - mu)
	}
}

// ReLU16 is ReLU on fp16 or bf16 bit patterns, inf being the type's +Inf
// (0x7c00 or 0x7f80): negative values and -0 become +0, NaN (a magnitude
// above inf) passes through. y may be x.
func ReLU16(y, x []uint16, inf uint16) { bestElementwise().relu16(y[:len(x)], x, inf) }

// ReLUBackward16 is ReLUBackward on 16-bit patterns: dx = dy where
// 1 <= y <= inf (positive, non-zero, not NaN), else +0. dx may be dy.
func ReLUBackward16(dx, dy, y []uint16, inf uint16) {
	bestElementwise().reluBack16(dx[:len(y)], dy[:len(y)], y, inf)
}

func relu16Go(y, x []uint16, inf uint16) {
	y = y[:len(x)]
	for i, b := range x {
		// keep b unless it is negative and not NaN
		keep := ^uint16(int16(b)>>15) | uint16((int32(0x8000|inf)-int32(b))>>31)
		y[i] = b & keep
	}
}

func reluBack16Go(dx, dy, y []uint16, inf uint16) {
	dy, dx = dy[:len(y)], dx[:len(y)]
	for i, b := range y {
		// all ones where 1 <= b <= inf
		keep := uint16((int32(b-1) - int32(inf)) >> 31)
		dx[i] = dy[i] & keep
	}
}

// ReLUMask packs ReLUBackward's test of y, one bit a value: bit i%8 of
// mask[i/8] is set where y[i] > 0 (positive, non-zero, not NaN); the last
// byte's spare bits are 0. mask has (len(y)+7)/8 bytes.
func ReLUMask(mask []uint8, y []float32) { bestElementwise().reluMask(mask, y) }

// ReLUMask16 is ReLUMask on 16-bit patterns, inf being the type's +Inf.
func ReLUMask16(mask []uint8, y []uint16, inf uint16) { bestElementwise().reluMask16(mask, y, inf) }

// ReLUBackwardMask is ReLUBackward reading y's ReLUMask: dx[i] = dy[i]
// where bit i is set, else +0. dx may be dy.
func ReLUBackwardMask(dx, dy []float32, mask []uint8) {
	bestElementwise().reluBackMask(dx[:len(dy)], dy, mask[:(len(dy)+7)/8])
}

// ReLUBackwardMask16 is ReLUBackwardMask on 16-bit patterns.
func ReLUBackwardMask16(dx, dy []uint16, mask []uint8) {
	bestElementwise().reluBackMask16(dx[:len(dy)], dy, mask[:(len(dy)+7)/8])
}

// The assembly takes whole mask bytes (8 values; 16 for 16-bit), so Go's
// share starts at a byte.

func (e elementwiseImpl) reluMask(mask []uint8, y []float32) {
	n := 0
	if e.avx2 {
		n = reluMaskAsm(mask, y)
	}
	reluMaskGo(mask[n/8:], y[n:])
}

func (e elementwiseImpl) reluMask16(mask []uint8, y []uint16, inf uint16) {
	n := 0
	if e.avx2 {
		n = reluMask16Asm(mask, y, inf)
	}
	reluMask16Go(mask[n/8:], y[n:], inf)
}

func (e elementwiseImpl) reluBackMask(dx, dy []float32, mask []uint8) {
	n := 0
	if e.avx2 {
		n = reluBackMaskAsm(dx, dy, mask)
	}
	reluBackMaskGo(dx[n:], dy[n:], mask[n/8:])
}

func (e elementwiseImpl) reluBackMask16(dx, dy []uint16, mask []uint8) {
	n := 0
	if e.avx2 {
		n = reluBackMask16Asm(dx, dy, mask)
	}
	reluBackMask16Go(dx[n:], dy[n:], mask[n/8:])
}

func reluMaskGo(mask []uint8, y []float32) {
	mask = mask[:(len(y)+7)/8]
	for j := range mask {
		chunk := y[8*j : min(8*j+8, len(y))]
		var m uint8
		for k, v := range chunk {
			// b-1 wraps +0 past 0x7f800000; 1 <= b <= 0x7f800000 is positive.
			m |= uint8((uint64(math.Float32bits(v)-1)-0x7f800000)>>63) << k
		}
		mask[j] = m
	}
}

func reluMask16Go(mask []uint8, y []uint16, inf uint16) {
	mask = mask[:(len(y)+7)/8]
	for j := range mask {
		chunk := y[8*j : min(8*j+8, len(y))]
		var m uint8
		for k, b := range chunk {
			m |= uint8((int32(b-1)-int32(inf))>>31&1) << k
		}
		mask[j] = m
	}
}

func reluBackMaskGo(dx, dy []float32, mask []uint8) {
	dx = dx[:len(dy)]
	for j := range (len(dy) + 7) / 8 {
		m := uint32(mask[j])
		for k := 8 * j; k < min(8*j+8, len(dy)); k++ {
			keep := -(m & 1) // all ones where the bit is set
			dx[k] = math.Float32frombits(math.Float32bits(dy[k]) & keep)
			m >>= 1
		}
	}
}

func reluBackMask16Go(dx, dy []uint16, mask []uint8) {
	dx = dx[:len(dy)]
	for j := range (len(dy) + 7) / 8 {
		m := uint16(mask[j])
		for k := 8 * j; k < min(8*j+8, len(dy)); k++ {
			dx[k] = dy[k] & -(m & 1)
			m >>= 1
		}
	}
}
