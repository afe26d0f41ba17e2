package backendtest

import (
	"math"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
)

// The references: plain float64 loops over NCHW indices, written from
// PyTorch's definitions of the operations, sharing nothing with any
// backend. The convolutions use kernels.Conv2dNaive and friends
// instantiated at float64: those are the textbook sums, independent of the
// CPU backend's fast kernels.

// refConv is torch.nn.functional.conv2d(in, w, bias, padding=Pad).
func refConv(s backend.ConvShape, in, w, bias []float64) []float64 {
	if s.Is3D() {
		return refConv3(s, in, w, bias)
	}
	out := make([]float64, s.OutSize())
	kernels.Conv2dNaive(s, out, in, w, bias)
	return out
}

// refConvBack adds conv2d's weight and bias gradients into dw and dbias
// (dbias may be nil) and returns the input gradient.
func refConvBack(s backend.ConvShape, dw, dbias, dout, in, w []float64) (din []float64) {
	if s.Is3D() {
		return refConv3Back(s, dw, dbias, dout, in, w)
	}
	din = make([]float64, s.InSize())
	kernels.Conv2dBackwardNaive(s, din, dw, dbias, dout, in, w)
	return din
}

// refUpConv is ConvTranspose2d(C, OC, 2, stride=2)(in).
func refUpConv(s backend.UpConvShape, in, w, bias []float64) []float64 {
	if s.Is3D() {
		return refUpConv3(s, in, w, bias)
	}
	out := make([]float64, s.OutSize())
	kernels.UpConvNaive(s, out, in, w, bias)
	return out
}

// refUpConvBack adds ConvTranspose2d's weight and bias gradients into dw
// and dbias and returns the input gradient.
func refUpConvBack(s backend.UpConvShape, dw, dbias, dout, in, w []float64) (din []float64) {
	if s.Is3D() {
		return refUpConv3Back(s, dw, dbias, dout, in, w)
	}
	din = make([]float64, s.InSize())
	kernels.UpConvBackwardNaive(s, din, dw, dbias, dout, in, w)
	return din
}

// normSets lists, for a batch norm (group false) or group norm, the flat
// indices of each set of values normalized together: per channel c over
// (N,H,W), or per (sample n, group g) over the group's channels and (H,W),
// in the order of the saved statistics (c, or n*Groups+g).
func normSets(a backend.NormArgs, group bool) [][]int {
	HW := a.H * a.W
	var sets [][]int
	if !group {
		for c := 0; c < a.C; c++ {
			var set []int
			for n := 0; n < a.N; n++ {
				for i := 0; i < HW; i++ {
					set = append(set, (n*a.C+c)*HW+i)
				}
			}
			sets = append(sets, set)
		}
		return sets
	}
	cg := a.C / a.Groups
	for n := 0; n < a.N; n++ {
		for g := 0; g < a.Groups; g++ {
			var set []int
			for c := g * cg; c < (g+1)*cg; c++ {
				for i := 0; i < HW; i++ {
					set = append(set, (n*a.C+c)*HW+i)
				}
			}
			sets = append(sets, set)
		}
	}
	return sets
}

// channel is the channel of flat index i of an (N,C,H,W) tensor.
func channel(s backend.Shape4, i int) int { return i / (s.H * s.W) % s.C }

// refNormStats returns each set's mean and biased variance
// (torch.var(unbiased=False)), by the two-pass definition.
func refNormStats(sets [][]int, x []float64) (mean, variance []float64) {
	for _, set := range sets {
		var s float64
		for _, i := range set {
			s += x[i]
		}
		mu := s / float64(len(set))
		var q float64
		for _, i := range set {
			q += (x[i] - mu) * (x[i] - mu)
		}
		mean = append(mean, mu)
		variance = append(variance, q/float64(len(set)))
	}
	return mean, variance
}

// invstd is 1/sqrt(variance+eps), elementwise.
func invstd(variance []float64, eps float64) []float64 {
	out := make([]float64, len(variance))
	for i, v := range variance {
		out[i] = 1 / math.Sqrt(v+eps)
	}
	return out
}

// refNormApply is out = gamma[c]*(x-mean)*invstd + beta[c], with each set's
// statistics.
func refNormApply(s backend.Shape4, sets [][]int, x, mean, inv, gamma, beta []float64) []float64 {
	out := make([]float64, len(x))
	for k, set := range sets {
		for _, i := range set {
			c := channel(s, i)
			out[i] = gamma[c]*(x[i]-mean[k])*inv[k] + beta[c]
		}
	}
	return out
}

// refNormBack is the backward of refNormApply with the statistics held as
// functions of x (PyTorch's native_batch_norm_backward and
// native_group_norm_backward, from the saved mean and invstd): per set of
// M values, with xhat = (x-mean)*invstd and dxhat = dout*gamma[c],
//
//	din = invstd/M * (M*dxhat - Σdxhat - xhat*Σ(dxhat*xhat))
//
// and dgamma[c] += Σ dout*xhat, dbeta[c] += Σ dout over every value of c.
func refNormBack(s backend.Shape4, sets [][]int, dgamma, dbeta, dout, x, mean, inv, gamma []float64) (din []float64) {
	din = make([]float64, len(x))
	for k, set := range sets {
		M := float64(len(set))
		var sd, sdx float64
		for _, i := range set {
			c := channel(s, i)
			xhat := (x[i] - mean[k]) * inv[k]
			dxhat := dout[i] * gamma[c]
			sd += dxhat
			sdx += dxhat * xhat
			dgamma[c] += dout[i] * xhat
			dbeta[c] += dout[i]
		}
		for _, i := range set {
			xhat := (x[i] - mean[k]) * inv[k]
			dxhat := dout[i] * gamma[channel(s, i)]
			din[i] = inv[k] / M * (M*dxhat - sd - xhat*sdx)
		}
	}
	return din
}

// refMaxPool is max_pool2d(in, 2) with return_indices, the index given as
// the window position 0..3 (row-major): PyTorch's loop keeps the first
// maximum and lets a NaN win (`if (val > maxval || isnan(val))`), so among
// several NaNs the last one. nans reports the windows holding more than one
// NaN, where the position is left to the backend.
func refMaxPool(s backend.Shape4, in []float32) (out []float32, pos []byte, nans []bool) {
	OH, OW := s.H/2, s.W/2
	for p := 0; p < s.N*s.C; p++ {
		plane := in[p*s.H*s.W:]
		for oy := 0; oy < OH; oy++ {
			for ox := 0; ox < OW; ox++ {
				best, at, count := float32(math.Inf(-1)), byte(0), 0
				for k := byte(0); k < 4; k++ {
					v := plane[(2*oy+int(k)/2)*s.W+2*ox+int(k)%2]
					if k == 0 || v > best || v != v {
						best, at = v, k
					}
					if v != v {
						count++
					}
				}
				out = append(out, best)
				pos = append(pos, at)
				nans = append(nans, count > 1)
			}
		}
	}
	return out, pos, nans
}

// refMaxPoolBack routes each dout value to its window's position; every
// other input (odd last rows and columns included) gets 0.
func refMaxPoolBack(s backend.Shape4, dout []float32, pos []byte) []float32 {
	din := make([]float32, s.Len())
	OH, OW := s.H/2, s.W/2
	for p := 0; p < s.N*s.C; p++ {
		for oy := 0; oy < OH; oy++ {
			for ox := 0; ox < OW; ox++ {
				o := (p*OH+oy)*OW + ox
				k := int(pos[o])
				din[p*s.H*s.W+(2*oy+k/2)*s.W+2*ox+k%2] = dout[o]
			}
		}
	}
	return din
}

// bilinearTap is PyTorch's upsample_bilinear2d source position for output
// index d of an axis of n inputs at scale 2, align_corners=False:
// src = (d+0.5)/2 - 0.5 clamped at 0, i0 its integer part, i1 the next
// input clamped at the edge, l1 the weight of i1.
func bilinearTap(n, d int) (i0, i1 int, l1 float64) {
	src := max((float64(d)+0.5)/2-0.5, 0)
	i0 = int(src)
	i1 = min(i0+1, n-1)
	return i0, i1, src - float64(i0)
}

// refUpsample is F.interpolate(in, scale_factor=2, mode="bilinear",
// align_corners=False).
func refUpsample(s backend.Shape4, in []float64) []float64 {
	H2, W2 := 2*s.H, 2*s.W
	out := make([]float64, s.N*s.C*H2*W2)
	for p := 0; p < s.N*s.C; p++ {
		x := in[p*s.H*s.W:]
		for oy := 0; oy < H2; oy++ {
			y0, y1, ly := bilinearTap(s.H, oy)
			for ox := 0; ox < W2; ox++ {
				x0, x1, lx := bilinearTap(s.W, ox)
				out[(p*H2+oy)*W2+ox] = (1-ly)*((1-lx)*x[y0*s.W+x0]+lx*x[y0*s.W+x1]) +
					ly*((1-lx)*x[y1*s.W+x0]+lx*x[y1*s.W+x1])
			}
		}
	}
	return out
}

// refUpsampleBack is refUpsample's adjoint (PyTorch's
// upsample_bilinear2d_backward): each output gradient scattered onto its
// four taps with their weights.
func refUpsampleBack(s backend.Shape4, dout []float64) []float64 {
	H2, W2 := 2*s.H, 2*s.W
	din := make([]float64, s.Len())
	for p := 0; p < s.N*s.C; p++ {
		d := din[p*s.H*s.W : (p+1)*s.H*s.W]
		for oy := 0; oy < H2; oy++ {
			y0, y1, ly := bilinearTap(s.H, oy)
			for ox := 0; ox < W2; ox++ {
				x0, x1, lx := bilinearTap(s.W, ox)
				g := dout[(p*H2+oy)*W2+ox]
				d[y0*s.W+x0] += (1 - ly) * (1 - lx) * g
				d[y0*s.W+x1] += (1 - ly) * lx * g
				d[y1*s.W+x0] += ly * (1 - lx) * g
				d[y1*s.W+x1] += ly * lx * g
			}
		}
	}
	return din
}

// refConcat is torch.cat([skip, up], dim=1) on n samples, as bytes.
func refConcat(n int, skip, up []byte) []byte {
	sn, un := len(skip)/n, len(up)/n
	var out []byte
	for i := 0; i < n; i++ {
		out = append(out, skip[i*sn:(i+1)*sn]...)
		out = append(out, up[i*un:(i+1)*un]...)
	}
	return out
}

// logSoftmaxAt returns log softmax of the K logits of pixel p of sample n
// at every class (float64, shifted by the maximum).
func logSoftmaxAt(s backend.Shape4, z []float64, n, p int) []float64 {
	K, HW := s.C, s.H*s.W
	mx := math.Inf(-1)
	for k := 0; k < K; k++ {
		mx = max(mx, z[(n*K+k)*HW+p])
	}
	var se float64
	for k := 0; k < K; k++ {
		se += math.Exp(z[(n*K+k)*HW+p] - mx)
	}
	lse := mx + math.Log(se)
	out := make([]float64, K)
	for k := range out {
		out[k] = z[(n*K+k)*HW+p] - lse
	}
	return out
}

// refCrossEntropy is F.cross_entropy(z, t, ignore_index=255,
// reduction="sum") and the number of pixels it sums; a target that is
// neither a class nor 255 is an error naming the first such pixel's sample
// and value.
func refCrossEntropy(s backend.Shape4, z []float64, t []byte) (sum float64, count int, bad *backend.TargetError) {
	HW := s.H * s.W
	for n := 0; n < s.N; n++ {
		for p := 0; p < HW; p++ {
			c := int(t[n*HW+p])
			if c == backend.IgnoreIndex {
				continue
			}
			if c >= s.C {
				if bad == nil {
					bad = &backend.TargetError{Value: c, Sample: n, Classes: s.C}
				}
				continue
			}
			sum -= logSoftmaxAt(s, z, n, p)[c]
			count++
		}
	}
	return sum, count, bad
}

// refCrossEntropyBack is k*(softmax(z) - onehot(t)) at pixels whose target
// is a class, 0 elsewhere (and everywhere if k is 0).
func refCrossEntropyBack(s backend.Shape4, z []float64, t []byte, k float64) []float64 {
	K, HW := s.C, s.H*s.W
	g := make([]float64, len(z))
	if k == 0 {
		return g
	}
	for n := 0; n < s.N; n++ {
		for p := 0; p < HW; p++ {
			c := int(t[n*HW+p])
			if c >= K {
				continue
			}
			ls := logSoftmaxAt(s, z, n, p)
			for j := 0; j < K; j++ {
				v := math.Exp(ls[j])
				if j == c {
					v--
				}
				g[(n*K+j)*HW+p] = k * v
			}
		}
	}
	return g
}

// refArgmax is torch.argmax(z, dim=1): each pixel's first largest class.
func refArgmax(s backend.Shape4, z []float32) []byte {
	K, HW := s.C, s.H*s.W
	out := make([]byte, s.N*HW)
	for n := 0; n < s.N; n++ {
		for p := 0; p < HW; p++ {
			best, arg := z[n*K*HW+p], 0
			for k := 1; k < K; k++ {
				if v := z[(n*K+k)*HW+p]; v > best {
					best, arg = v, k
				}
			}
			out[n*HW+p] = byte(arg)
		}
	}
	return out
}

// refConfusion adds one to counts[t*K + argmax] for every pixel whose
// target t is a class.
func refConfusion(s backend.Shape4, counts []int64, z []float32, t []byte) {
	am := refArgmax(s, z)
	for i, c := range t {
		if int(c) < s.C {
			counts[int(c)*s.C+int(am[i])]++
		}
	}
}

// refAdam is one step of the documented update (backend.AdamStep) in
// float64 on the float32 factors, returning the new w, m and v.
func refAdam(a backend.AdamStep, w, g, m, v []float32) (w2, m2, v2 []float64) {
	for j := range w {
		w0 := float64(w[j])
		if a.DecoupledScale != 0 {
			w0 *= float64(a.DecoupledScale)
		}
		gj := float64(g[j])
		if a.WeightDecay != 0 {
			gj += float64(a.WeightDecay) * w0
		}
		mj := float64(a.Beta1)*float64(m[j]) + float64(a.OneMinusBeta1)*gj
		vj := float64(a.Beta2)*float64(v[j]) + float64(a.OneMinusBeta2)*gj*gj
		wj := w0 - float64(a.StepSize)*mj/(math.Sqrt(vj)/float64(a.SqrtBC2)+float64(a.Eps))
		w2, m2, v2 = append(w2, wj), append(m2, mj), append(v2, vj)
	}
	return w2, m2, v2
}

// refSGD is backend.SGDStep's update in float64.
func refSGD(a backend.SGDStep, w, g, buf []float32) (w2, buf2 []float64) {
	for j := range w {
		d := float64(g[j])
		if a.WeightDecay != 0 {
			d += float64(a.WeightDecay) * float64(w[j])
		}
		var b float64
		if a.Momentum != 0 {
			b = float64(a.Momentum)*float64(buf[j]) + (1-float64(a.Dampening))*d
			if a.First {
				b = d
			}
			if a.Nesterov {
				d += float64(a.Momentum) * b
			} else {
				d = b
			}
		}
		w2, buf2 = append(w2, float64(w[j])-float64(a.LR)*d), append(buf2, b)
	}
	return w2, buf2
}

// refRMSprop is backend.RMSpropStep's update in float64.
func refRMSprop(a backend.RMSpropStep, w, g, sq, buf []float32) (w2, sq2, buf2 []float64) {
	for j := range w {
		d := float64(g[j])
		if a.WeightDecay != 0 {
			d += float64(a.WeightDecay) * float64(w[j])
		}
		s := float64(a.Alpha)*float64(sq[j]) + float64(a.OneMinusAlpha)*d*d
		avg := math.Sqrt(s) + float64(a.Eps)
		var b, wj float64
		if a.Momentum != 0 {
			b = float64(a.Momentum)*float64(buf[j]) + d/avg
			wj = float64(w[j]) - float64(a.LR)*b
		} else {
			wj = float64(w[j]) - float64(a.LR)*d/avg
		}
		w2, sq2, buf2 = append(w2, wj), append(sq2, s), append(buf2, b)
	}
	return w2, sq2, buf2
}

// refLossSums is backend.LossSums' four per-class sums from scratch.
func refLossSums(s backend.Shape4, z []float64, t []byte, gamma float64) []float64 {
	K, HW := s.C, s.H*s.W
	out := make([]float64, 4*K)
	for n := 0; n < s.N; n++ {
		for p := 0; p < HW; p++ {
			c := int(t[n*HW+p])
			if c >= K {
				continue
			}
			ls := logSoftmaxAt(s, z, n, p)
			pc := math.Exp(ls[c])
			q := 0.0 // 1-p_c, from the other classes (see refLossBack)
			for j := range K {
				if j != c {
					q += math.Exp(ls[j])
				}
			}
			out[c] += -math.Pow(q, gamma) * ls[c]
			out[K+c]++
			out[2*K+c] += pc
			for j := range K {
				out[3*K+j] += math.Exp(ls[j])
			}
		}
	}
	return out
}

// refLossBack is backend.LossBack by the chain rule through the softmax
// Jacobian: dL/dz_j = Σ_c dL/dp_c · p_c(δ_cj - p_j), with dL/dp_c =
// coef[t]·d/dp_t[-(1-p_t)^γ log p_t]·δ_ct + d_c.
func refLossBack(s backend.Shape4, z []float64, t []byte, gamma float64, coef []float64) []float64 {
	K, HW := s.C, s.H*s.W
	g := make([]float64, len(z))
	for n := 0; n < s.N; n++ {
		for p := 0; p < HW; p++ {
			tc := int(t[n*HW+p])
			if tc >= K {
				continue
			}
			ls := logSoftmaxAt(s, z, n, p)
			prob := make([]float64, K)
			for j := range prob {
				prob[j] = math.Exp(ls[j])
			}
			dp := make([]float64, K)
			for c := range K {
				dp[c] = coef[2*K+c]
			}
			// 1-p_t from the other classes: 1 - p_t rounds to 0 long
			// before they vanish, where (1-p)^(γ-1) would be infinite.
			pt, q := prob[tc], 0.0
			for j, v := range prob {
				if j != tc {
					q += v
				}
			}
			focal := -1 / pt // d/dp of -log p
			switch {
			case gamma != 0 && q == 0:
				focal = 0 // the limit of focal·p_t·(δ - p_j), all of whose terms vanish
			case gamma != 0:
				focal = gamma*math.Pow(q, gamma-1)*ls[tc] - math.Pow(q, gamma)/pt
			}
			dp[tc] += coef[tc]*focal + coef[K+tc]
			for j := range K {
				v := 0.0
				for c := range K {
					d := -prob[j]
					if c == j {
						d++
					}
					v += dp[c] * prob[c] * d
				}
				g[(n*K+j)*HW+p] = v
			}
		}
	}
	return g
}
