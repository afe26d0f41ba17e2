package backendtest

import (
	"github.com/memunet/memunet/backend"
)

// The 3D references: plain float64 loops over NCDHW indices, written from
// PyTorch's Conv3d, ConvTranspose3d, max_pool3d and trilinear
// interpolation, sharing nothing with any backend (not even the 2D
// references).

// at5 is the flat index of (n, c, d, h, w) in an (N, C, D, H, W) tensor.
func at5(C, D, H, W, n, c, d, h, w int) int { return (((n*C+c)*D+d)*H+h)*W + w }

// conv3Taps calls tap for every product of conv3d: output index oi (with
// its channel o), weight index wi and input index ii, the zero padding
// left out; in the order of the output's indices, then c, kd, i, j.
func conv3Taps(s backend.ConvShape, tap func(oi, o, wi, ii int)) {
	D, KD, OD, OH, OW, K := s.Depth(), s.KDepth(), s.OD(), s.OH(), s.OW(), s.K
	for n := range s.N {
		for o := range s.OC {
			for z := range OD {
				for y := range OH {
					for x := range OW {
						oi := at5(s.OC, OD, OH, OW, n, o, z, y, x)
						tap(oi, o, -1, -1) // the output itself, before its products
						for c := range s.C {
							for kd := range KD {
								d := z + kd - s.PadD
								if d < 0 || d >= D {
									continue
								}
								for i := range K {
									h := y + i - s.Pad
									if h < 0 || h >= s.H {
										continue
									}
									for j := range K {
										ww := x + j - s.Pad
										if ww < 0 || ww >= s.W {
											continue
										}
										tap(oi, o, at5(s.C, KD, K, K, o, c, kd, i, j), at5(s.C, D, s.H, s.W, n, c, d, h, ww))
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// refConv3 is torch.nn.functional.conv3d(in, w, bias,
// padding=(PadD,Pad,Pad)); bias may be nil.
func refConv3(s backend.ConvShape, in, w, bias []float64) []float64 {
	out := make([]float64, s.OutSize())
	conv3Taps(s, func(oi, o, wi, ii int) {
		switch {
		case wi >= 0:
			out[oi] += w[wi] * in[ii]
		case bias != nil:
			out[oi] = bias[o]
		}
	})
	return out
}

// refConv3Back adds conv3d's weight and bias gradients into dw and dbias
// (dbias may be nil) and returns the input gradient.
func refConv3Back(s backend.ConvShape, dw, dbias, dout, in, w []float64) (din []float64) {
	din = make([]float64, s.InSize())
	conv3Taps(s, func(oi, o, wi, ii int) {
		g := dout[oi]
		switch {
		case wi >= 0:
			dw[wi] += g * in[ii]
			din[ii] += g * w[wi]
		case dbias != nil:
			dbias[o] += g
		}
	})
	return din
}

// refUpConv3 is ConvTranspose3d(C, OC, (KD,2,2), stride=(KD,2,2))(in):
// out[n,o,KD*d+a,2h+b,2w+e] = bias[o] + sum_c in[n,c,d,h,w] w[c,o,a,b,e].
func refUpConv3(s backend.UpConvShape, in, w, bias []float64) []float64 {
	D, KD := s.Depth(), s.KDepth()
	OD, OH, OW := KD*D, 2*s.H, 2*s.W
	out := make([]float64, s.OutSize())
	for n := range s.N {
		for o := range s.OC {
			for z := range OD {
				for y := range OH {
					for x := range OW {
						var acc float64
						if bias != nil {
							acc = bias[o]
						}
						for c := range s.C {
							acc += in[at5(s.C, D, s.H, s.W, n, c, z/KD, y/2, x/2)] * w[at5(s.OC, KD, 2, 2, c, o, z%KD, y%2, x%2)]
						}
						out[at5(s.OC, OD, OH, OW, n, o, z, y, x)] = acc
					}
				}
			}
		}
	}
	return out
}

// refUpConv3Back adds ConvTranspose3d's weight and bias gradients into dw
// and dbias and returns the input gradient.
func refUpConv3Back(s backend.UpConvShape, dw, dbias, dout, in, w []float64) (din []float64) {
	D, KD := s.Depth(), s.KDepth()
	OD, OH, OW := KD*D, 2*s.H, 2*s.W
	din = make([]float64, s.InSize())
	for n := range s.N {
		for o := range s.OC {
			for z := range OD {
				for y := range OH {
					for x := range OW {
						g := dout[at5(s.OC, OD, OH, OW, n, o, z, y, x)]
						if dbias != nil {
							dbias[o] += g
						}
						for c := range s.C {
							ii, wi := at5(s.C, D, s.H, s.W, n, c, z/KD, y/2, x/2), at5(s.OC, KD, 2, 2, c, o, z%KD, y%2, x%2)
							dw[wi] += in[ii] * g
							din[ii] += w[wi] * g
						}
					}
				}
			}
		}
	}
	return din
}

// refMaxPool3 is max_pool3d(in, k, stride=k) with return_indices, the
// index given as the window position (kd*k.H+kh)*k.W+kw: the first
// maximum in window order, a NaN winning (`val > maxval || isnan(val)`);
// nans reports the windows holding more than one NaN, where the position
// is left to the backend.
func refMaxPool3(s backend.Shape5, k backend.Scale3, in []float32) (out []float32, pos []byte, nans []bool) {
	o := s.Pooled(k)
	for p := range s.N * s.C {
		for od := range o.D {
			for oh := range o.H {
				for ow := range o.W {
					var best float32
					at, count := 0, 0
					for kd := range k.D {
						for kh := range k.H {
							for kw := range k.W {
								v := in[at5(1, s.D, s.H, s.W, p, 0, od*k.D+kd, oh*k.H+kh, ow*k.W+kw)]
								q := (kd*k.H+kh)*k.W + kw
								if q == 0 || v > best || v != v {
									best, at = v, q
								}
								if v != v {
									count++
								}
							}
						}
					}
					out = append(out, best)
					pos = append(pos, byte(at))
					nans = append(nans, count > 1)
				}
			}
		}
	}
	return out, pos, nans
}

// refMaxPool3Back routes each dout value to its window's position; every
// other input gets 0.
func refMaxPool3Back(s backend.Shape5, k backend.Scale3, dout []float32, pos []byte) []float32 {
	o := s.Pooled(k)
	din := make([]float32, s.Len())
	for p := range s.N * s.C {
		for od := range o.D {
			for oh := range o.H {
				for ow := range o.W {
					i := at5(1, o.D, o.H, o.W, p, 0, od, oh, ow)
					q := int(pos[i])
					kd, kh, kw := q/(k.H*k.W), q/k.W%k.H, q%k.W
					din[at5(1, s.D, s.H, s.W, p, 0, od*k.D+kd, oh*k.H+kh, ow*k.W+kw)] = dout[i]
				}
			}
		}
	}
	return din
}

// linearTap is PyTorch's source position for output index d of an axis of
// n inputs at integer scale f, align_corners=False: src = (d+0.5)/f - 0.5
// clamped at 0, i0 its integer part, i1 the next input clamped at the
// edge, l1 the weight of i1 (scale 1: d itself).
func linearTap(n, f, d int) (i0, i1 int, l1 float64) {
	src := max((float64(d)+0.5)/float64(f)-0.5, 0)
	i0 = int(src)
	return i0, min(i0+1, n-1), src - float64(i0)
}

// refUpsample3 is F.interpolate(in, scale_factor=(f.D,f.H,f.W),
// mode="trilinear", align_corners=False) (a factor of 1 leaves its axis).
func refUpsample3(s backend.Shape5, f backend.Scale3, in []float64) []float64 {
	o := s.Scaled(f)
	out := make([]float64, o.Len())
	for p := range s.N * s.C {
		for z := range o.D {
			d0, d1, ld := linearTap(s.D, f.D, z)
			for y := range o.H {
				h0, h1, lh := linearTap(s.H, f.H, y)
				for x := range o.W {
					w0, w1, lw := linearTap(s.W, f.W, x)
					v := func(d, h, w int) float64 { return in[at5(1, s.D, s.H, s.W, p, 0, d, h, w)] }
					plane := func(d int) float64 {
						return (1-lh)*((1-lw)*v(d, h0, w0)+lw*v(d, h0, w1)) + lh*((1-lw)*v(d, h1, w0)+lw*v(d, h1, w1))
					}
					out[at5(1, o.D, o.H, o.W, p, 0, z, y, x)] = (1-ld)*plane(d0) + ld*plane(d1)
				}
			}
		}
	}
	return out
}

// refUpsample3Back is refUpsample3's adjoint (upsample_trilinear3d_backward):
// each output gradient scattered onto its eight taps with their weights.
func refUpsample3Back(s backend.Shape5, f backend.Scale3, dout []float64) []float64 {
	o := s.Scaled(f)
	din := make([]float64, s.Len())
	for p := range s.N * s.C {
		for z := range o.D {
			d0, d1, ld := linearTap(s.D, f.D, z)
			for y := range o.H {
				h0, h1, lh := linearTap(s.H, f.H, y)
				for x := range o.W {
					w0, w1, lw := linearTap(s.W, f.W, x)
					g := dout[at5(1, o.D, o.H, o.W, p, 0, z, y, x)]
					for _, t := range [8]struct {
						d, h, w int
						l       float64
					}{
						{d0, h0, w0, (1 - ld) * (1 - lh) * (1 - lw)}, {d0, h0, w1, (1 - ld) * (1 - lh) * lw},
						{d0, h1, w0, (1 - ld) * lh * (1 - lw)}, {d0, h1, w1, (1 - ld) * lh * lw},
						{d1, h0, w0, ld * (1 - lh) * (1 - lw)}, {d1, h0, w1, ld * (1 - lh) * lw},
						{d1, h1, w0, ld * lh * (1 - lw)}, {d1, h1, w1, ld * lh * lw},
					} {
						din[at5(1, s.D, s.H, s.W, p, 0, t.d, t.h, t.w)] += t.l * g
					}
				}
			}
		}
	}
	return din
}
