package model

// Upsample2 is PyTorch's Upsample(scale_factor=2, mode="bilinear",
// align_corners=False): in (N,C,H,W), out (N,C,2H,2W). It has no parameters
// and keeps nothing but the input shape for backward.
type Upsample2 struct {
	inShape [4]int
}

// bilinearTaps gives, for each of the 2n output positions along one axis, the
// two input positions and their weights, by PyTorch's rule for
// align_corners=False: src = (dst+0.5)/2 - 0.5, clamped below at 0;
// i0 = floor(src), i1 = min(i0+1, n-1), weights (1-l, l) with l = src - i0.
func bilinearTaps(n int) (i0, i1 []int, w0, w1 []float32) {
	i0, i1 = make([]int, 2*n), make([]int, 2*n)
	w0, w1 = make([]float32, 2*n), make([]float32, 2*n)
	for d := range 2 * n {
		src := max((float32(d)+0.5)*0.5-0.5, 0)
		lo := int(src)
		lambda := src - float32(lo)
		i0[d], i1[d] = lo, min(lo+1, n-1)
		w0[d], w1[d] = 1-lambda, lambda
	}
	return i0, i1, w0, w1
}

// Forward interpolates.
func (l *Upsample2) Forward(env *Env, in *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	H, W := in.H, in.W
	out, err := env.newActivation(in.N, in.C, 2*H, 2*W)
	if err != nil {
		return nil, err
	}
	l.inShape = in.Shape()
	f := env.frame()
	x, y := f.view(in), f.writer(out)
	if f.err != nil {
		f.finish()
		out.Release()
		return nil, f.err
	}
	y0, y1, wy0, wy1 := bilinearTaps(H)
	x0, x1, wx0, wx1 := bilinearTaps(W)
	env.forEach(in.N*in.C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			src := x[p*H*W : (p+1)*H*W]
			dst := y[p*4*H*W : (p+1)*4*H*W]
			for oy := range 2 * H {
				r0, r1 := src[y0[oy]*W:], src[y1[oy]*W:]
				a, b := wy0[oy], wy1[oy]
				row := dst[oy*2*W : (oy+1)*2*W]
				for ox := range row {
					row[ox] = a*(wx0[ox]*r0[x0[ox]]+wx1[ox]*r0[x1[ox]]) +
						b*(wx0[ox]*r1[x0[ox]]+wx1[ox]*r1[x1[ox]])
				}
			}
		}
	})
	f.finish()
	return out, nil
}

// Backward is the adjoint of Forward: each dout value is spread back onto
// the four input pixels it was interpolated from, with the same weights.
// It consumes dout.
func (l *Upsample2) Backward(env *Env, dout *Tensor) (*Tensor, error) {
	defer env.Profile.begin(KindUpsample)()
	N, C, H, W := l.inShape[0], l.inShape[1], l.inShape[2], l.inShape[3]
	din, err := env.newActivation(N, C, H, W)
	if err != nil {
		return nil, err
	}
	f := env.frame()
	dy, dx := f.view(dout), f.writer(din)
	if f.err != nil {
		f.finish()
		din.Release()
		return nil, f.err
	}
	y0, y1, wy0, wy1 := bilinearTaps(H)
	x0, x1, wx0, wx1 := bilinearTaps(W)
	env.forEach(N*C, 1, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			g := dy[p*4*H*W : (p+1)*4*H*W]
			plane := dx[p*H*W : (p+1)*H*W]
			clear(plane)
			for oy := range 2 * H {
				r0, r1 := plane[y0[oy]*W:], plane[y1[oy]*W:]
				a, b := wy0[oy], wy1[oy]
				for ox, v := range g[oy*2*W : (oy+1)*2*W] {
					v0, v1 := a*v, b*v
					r0[x0[ox]] += wx0[ox] * v0
					r0[x1[ox]] += wx1[ox] * v0
					r1[x0[ox]] += wx0[ox] * v1
					r1[x1[ox]] += wx1[ox] * v1
				}
			}
		}
	})
	f.finish()
	dout.Release()
	return din, nil
}

func (l *Upsample2) forget() {}
