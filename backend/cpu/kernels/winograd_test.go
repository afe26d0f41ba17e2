package kernels

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/memunet/memunet/backend"
)

// winoShapes are convolutions the Winograd kernels take: rows of 16k
// tiles and of 8 (two tile rows a chunk), channels that fill the 8- and
// 6-row kernels and that do not, more channels than a k slab (forward
// and input gradient), one tile row, bands cut short at the bottom.
var winoShapes = []backend.ConvShape{
	{N: 2, C: 5, H: 4, W: 16, OC: 7, K: 3, Pad: 1},
	{N: 1, C: 16, H: 6, W: 32, OC: 16, K: 3, Pad: 1},
	{N: 2, C: 16, H: 12, W: 16, OC: 24, K: 3, Pad: 1},
	{N: 1, C: 3, H: 10, W: 64, OC: 13, K: 3, Pad: 1},
	{N: 1, C: 8, H: 2, W: 32, OC: 8, K: 3, Pad: 1},
	{N: 1, C: 300, H: 4, W: 16, OC: 9, K: 3, Pad: 1},
	{N: 1, C: 9, H: 4, W: 16, OC: 270, K: 3, Pad: 1},
	{N: 3, C: 32, H: 34, W: 32, OC: 40, K: 3, Pad: 1},
}

// winoUNetShapes are the seed UNet's 3x3 convolutions the Winograd
// kernels take (the 8x8 level's rows are 4 tiles: direct), at their
// widths; the images are cut to 32 rows (the 16-pixel rows keep 16) so
// that the float64 references stay quick, which keeps each shape's paths
// (rows of 64, 32, 16 and 8 tiles).
var winoUNetShapes = []backend.ConvShape{
	{N: 1, C: 16, H: 32, W: 128, OC: 16, K: 3, Pad: 1},
	{N: 1, C: 16, H: 32, W: 64, OC: 32, K: 3, Pad: 1},
	{N: 1, C: 32, H: 32, W: 64, OC: 32, K: 3, Pad: 1},
	{N: 1, C: 32, H: 32, W: 32, OC: 64, K: 3, Pad: 1},
	{N: 1, C: 64, H: 32, W: 32, OC: 64, K: 3, Pad: 1},
	{N: 1, C: 64, H: 16, W: 16, OC: 128, K: 3, Pad: 1},
	{N: 1, C: 128, H: 16, W: 16, OC: 128, K: 3, Pad: 1},
	{N: 1, C: 384, H: 16, W: 16, OC: 128, K: 3, Pad: 1},
	{N: 1, C: 192, H: 32, W: 32, OC: 64, K: 3, Pad: 1},
	{N: 1, C: 96, H: 32, W: 64, OC: 32, K: 3, Pad: 1},
	{N: 1, C: 48, H: 32, W: 128, OC: 16, K: 3, Pad: 1},
}

// Absolute-value transforms of the error bound: |B^T|, |G|, |A^T|.
var (
	absBT = [4][4]float64{{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}}
	absG  = [4][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, {0, 0, 1}}
	absAT = [2][4]float64{{1, 1, 1, 0}, {0, 1, 1, 1}}
)

// absInputTile is |B^T| |d| |B| of x's 4x4 window at tile (ty, tx) of
// plane (H x W, padding 1).
func absInputTile(plane []float64, H, W, ty, tx int) (v [4][4]float64) {
	var d [4][4]float64
	for r := range 4 {
		for c := range 4 {
			y, x := 2*ty+r-1, 2*tx+c-1
			if y >= 0 && y < H && x >= 0 && x < W {
				d[r][c] = math.Abs(plane[y*W+x])
			}
		}
	}
	for i := range 4 {
		for j := range 4 {
			for r := range 4 {
				for c := range 4 {
					v[i][j] += absBT[i][r] * d[r][c] * absBT[j][c]
				}
			}
		}
	}
	return v
}

// absFilterTile is |G| |g| |G^T| of a 3x3 kernel.
func absFilterTile(g []float64) (u [4][4]float64) {
	for i := range 4 {
		for j := range 4 {
			for r := range 3 {
				for c := range 3 {
					u[i][j] += absG[i][r] * math.Abs(g[3*r+c]) * absG[j][c]
				}
			}
		}
	}
	return u
}

// winoBoundForward is E of the package comment for each output of s:
// sum over c of |A^T| (|G||g||G^T| ⊙ |B^T||d||B|) |A|.
func winoBoundForward(s backend.ConvShape, in, w []float64) []float64 {
	TH, TW, HW := s.H/2, s.W/2, s.H*s.W
	us := make([][4][4]float64, s.OC*s.C)
	for i := range us {
		us[i] = absFilterTile(w[9*i : 9*i+9])
	}
	e := make([]float64, s.OutSize())
	vs := make([][4][4]float64, s.C)
	for n := range s.N {
		for ty := range TH {
			for tx := range TW {
				for c := range s.C {
					vs[c] = absInputTile(in[(n*s.C+c)*HW:], s.H, s.W, ty, tx)
				}
				for o := range s.OC {
					var p [4][4]float64
					for c := range s.C {
						u := &us[o*s.C+c]
						for i := range 4 {
							for j := range 4 {
								p[i][j] += u[i][j] * vs[c][i][j]
							}
						}
					}
					for a := range 2 {
						for b := range 2 {
							var y float64
							for i := range 4 {
								for j := range 4 {
									y += absAT[a][i] * p[i][j] * absAT[b][j]
								}
							}
							e[(n*s.OC+o)*HW+(2*ty+a)*s.W+2*tx+b] = y
						}
					}
				}
			}
		}
	}
	return e
}

// winoBoundWeightGrad is the weight gradient's E for each dw[o][c][i][j]:
// |G^T| (sum over tiles of |A||dY||A^T| ⊙ |B^T||d||B|) |G|.
func winoBoundWeightGrad(s backend.ConvShape, in, dout []float64) []float64 {
	TH, TW, HW := s.H/2, s.W/2, s.H*s.W
	sum := make([][4][4]float64, s.OC*s.C)
	vs := make([][4][4]float64, s.C)
	for n := range s.N {
		for ty := range TH {
			for tx := range TW {
				for c := range s.C {
					vs[c] = absInputTile(in[(n*s.C+c)*HW:], s.H, s.W, ty, tx)
				}
				for o := range s.OC {
					var m [4][4]float64 // |A| |dY| |A^T|
					for i := range 4 {
						for j := range 4 {
							for a := range 2 {
								for b := range 2 {
									m[i][j] += absAT[a][i] * math.Abs(dout[(n*s.OC+o)*HW+(2*ty+a)*s.W+2*tx+b]) * absAT[b][j]
								}
							}
						}
					}
					for c := range s.C {
						p := &sum[o*s.C+c]
						for i := range 4 {
							for j := range 4 {
								p[i][j] += m[i][j] * vs[c][i][j]
							}
						}
					}
				}
			}
		}
	}
	e := make([]float64, s.WeightSize())
	for k, p := range sum {
		for r := range 3 {
			for c := range 3 {
				for i := range 4 {
					for j := range 4 {
						e[9*k+3*r+c] += absG[i][r] * p[i][j] * absG[j][c]
					}
				}
			}
		}
	}
	return e
}

// flipTranspose is the input gradient's weights: w'[c][o] = w[o][c]
// rotated by 180 degrees.
func flipTranspose(s backend.ConvShape, w []float64) []float64 {
	f := make([]float64, len(w))
	for o := range s.OC {
		for c := range s.C {
			for i := range 9 {
				f[(c*s.OC+o)*9+i] = w[(o*s.C+c)*9+8-i]
			}
		}
	}
	return f
}

// checkBound fails unless |got - want| <= gamma*e + |want|*u (the result's
// own rounding) everywhere, and reports the worst ratio to the bound.
func checkBound(t *testing.T, what string, got []float32, want, e []float64, gamma float64) float64 {
	t.Helper()
	worst := 0.0
	for i, g := range got {
		bound := gamma*e[i] + math.Abs(want[i])*0x1p-24
		d := math.Abs(float64(g) - want[i])
		if !(d <= bound) {
			t.Errorf("%s: value %d: %v, want %v: |diff| %.3g > bound %.3g", what, i, g, want[i], d, bound)
			return math.Inf(1)
		}
		if bound > 0 {
			worst = max(worst, d/bound)
		}
	}
	return worst
}

// winoRun is one Winograd forward, input gradient and weight gradient
// of s under g with a workspace of ws values.
type winoRun struct {
	out, din, dw []float32
}

func runWinograd(g gemmImpl, s backend.ConvShape, in, w, bias, dout, dw0 []float32, ws int) winoRun {
	work := garbage(seedFor("ws"), ws)
	u, rest := g.team.WinogradFilter(s, w, work, false)
	out := garbage(seedFor("out"), s.OutSize())
	g.winogradConv(s, out, Float32Image(in), u, bias, rest)
	fillGarbage(seedFor("ws"), work)
	uf, rest := g.team.WinogradFilter(s, w, work, true)
	din := garbage(seedFor("din"), s.InSize())
	g.winogradConv(WinogradSwapped(s), din, Float32Image(dout), uf, nil, rest)
	fillGarbage(seedFor("ws"), work)
	du, rest := g.carve(work, WinogradFilterSize(s))
	clear(du)
	g.winogradWeightGrad(s, du, dout, Float32Image(in), rest)
	dw := clone32(dw0)
	g.team.WinogradWeightGradAdd(s, dw, du, rest)
	return winoRun{out, din, dw}
}

// testWinogradShape holds every implementation's Winograd forward, input
// and weight gradients to the float64 direct convolution within the
// stated bound, and returns the worst ratio of error to bound.
func testWinogradShape(t *testing.T, s backend.ConvShape) float64 {
	r := seedFor(convName(s))
	in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
	dout, dw0 := randSlice(r, s.OutSize()), randSlice(r, s.WeightSize())
	in64, w64, dout64 := to64(in), to64(w), to64(dout)
	out64 := make([]float64, s.OutSize())
	Conv2dNaive(s, out64, in64, w64, to64(bias))
	din64, dw64 := make([]float64, s.InSize()), to64(dw0)
	Conv2dBackwardNaive(s, din64, dw64, nil, dout64, in64, w64)
	eOut := winoBoundForward(s, in64, w64)
	eDin := winoBoundForward(WinogradSwapped(s), dout64, flipTranspose(s, w64))
	eDw := winoBoundWeightGrad(s, in64, dout64)
	const u = 0x1p-24
	slabs := func(k int) float64 { return float64(ceilDiv(k, gemmKC)) }
	gOut := (float64(s.C) + 16 + slabs(s.C)) * u
	gDin := (float64(s.OC) + 16 + slabs(s.OC)) * u
	gDw := (gemmKC + float64(s.N)*slabs(s.H/2*s.W/2) + 20) * u
	worst := 0.0
	for _, g := range gemmImpls(t) {
		g.team = NewTeam()
		g.strict = true
		ws := ConvWorkspace(withAlgo(s, backend.ConvWinograd))
		got := runWinograd(g, s, in, w, bias, dout, dw0, ws)
		worst = max(worst,
			checkBound(t, g.name+" forward", got.out, out64, eOut, gOut),
			checkBound(t, g.name+" input gradient", got.din, din64, eDin, gDin),
			checkBound(t, g.name+" weight gradient", got.dw, dw64, eDw, gDw))
	}
	return worst
}

func withAlgo(s backend.ConvShape, a backend.ConvAlgo) backend.ConvShape {
	s.Algo = a
	return s
}

func TestWinogradMatchesDirect(t *testing.T) {
	for _, s := range winoShapes {
		t.Run(convName(s), func(t *testing.T) {
			if !winoShapeOK(s) {
				t.Fatalf("%+v does not qualify", s)
			}
			testWinogradShape(t, s)
		})
	}
}

// TestWinogradErrorBound: at the seed UNet's widths, every output of
// the three products is within the stated bound ((C+16+slabs)·u·E and
// the weight gradient's, winograd.go) of the exact convolution, on
// random inputs.
func TestWinogradErrorBound(t *testing.T) {
	for _, s := range winoUNetShapes {
		t.Run(convName(s), func(t *testing.T) {
			t.Logf("worst |error|/bound %.3f", testWinogradShape(t, s))
		})
	}
}

// TestWinogradWeightGradUnpaddedRows: a workspace too small for the
// weight gradient's padded rows but large enough unpadded (the seed UNet
// at base 64 has one, where its peak is) takes the unpadded rows, with
// the padded rows' bits, on every implementation.
func TestWinogradWeightGradUnpaddedRows(t *testing.T) {
	for _, s := range []backend.ConvShape{
		{N: 2, C: 48, H: 16, W: 128, OC: 16, K: 3, Pad: 1},
		{N: 1, C: 24, H: 24, W: 64, OC: 40, K: 3, Pad: 1},
	} {
		r := seedFor(convName(s))
		in, dout, dw0 := randSlice(r, s.InSize()), randSlice(r, s.OutSize()), randSlice(r, s.WeightSize())
		one := s.Images(1)
		R := min(s.H/2, winoGradUnit(s.W/2)) // the least band
		tight, padded := winoGradNeedLd(one, R, false), winoGradNeed(one, R)
		if R == 0 || winoGradRows(one, tight) != R || winoGradRows(one, tight-1) != 0 || tight >= padded {
			t.Fatalf("%s: band %d, unpadded need %d, padded %d, rows at them %d, %d", convName(s), R, tight, padded, winoGradRows(one, tight), winoGradRows(one, tight-1))
		}
		for _, g := range gemmImpls(t) {
			g.strict, g.team = true, NewTeam()
			dw := func(ws int) []float32 {
				work := garbage(seedFor("ws"), ws)
				du, rest := g.carve(work, WinogradFilterSize(s))
				clear(du)
				g.winogradWeightGrad(s, du, dout, Float32Image(in), rest)
				out := clone32(dw0)
				g.team.WinogradWeightGradAdd(s, out, du, rest)
				return out
			}
			if !slices.Equal(dw(tight), dw(padded)) {
				t.Errorf("%s %s: the weight gradient with unpadded rows differs from the padded rows'", g.name, convName(s))
			}
		}
	}
}

// TestWinogradBitsWhateverTheCores: the forward, input gradient and
// weight gradient give the same bits at any core count and any
// workspace (band height) under one implementation.
func TestWinogradBitsWhateverTheCores(t *testing.T) {
	for _, s := range []backend.ConvShape{
		{N: 2, C: 16, H: 40, W: 32, OC: 24, K: 3, Pad: 1},
		{N: 1, C: 8, H: 40, W: 16, OC: 8, K: 3, Pad: 1},
		{N: 1, C: 8, H: 66, W: 128, OC: 16, K: 3, Pad: 1},
	} {
		r := seedFor(convName(s))
		in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
		dout, dw0 := randSlice(r, s.OutSize()), randSlice(r, s.WeightSize())
		for _, g := range gemmImpls(t) {
			g.team = NewTeam()
			var ref winoRun
			for i, procs := range []int{1, 2, 7} {
				withProcs(procs, func() {
					one := s.Images(1)
					ws := ConvWorkspace(withAlgo(s, backend.ConvWinograd))
					// The least workspace each part takes, and more.
					least := max(winoForwardNeed(one, rowStep(s.W/2)), winoForwardNeed(WinogradSwapped(one), rowStep(s.W/2)))
					for _, n := range []int{ws, least, ws + 1000} {
						if n == least && winoGradRows(one, n) == 0 {
							continue
						}
						got := runWinograd(g, s, in, w, bias, dout, dw0, n)
						if i == 0 && n == ws {
							ref = got
							continue
						}
						for _, c := range []struct {
							what      string
							got, want []float32
						}{{"forward", got.out, ref.out}, {"input gradient", got.din, ref.din}, {"weight gradient", got.dw, ref.dw}} {
							if !slices.Equal(c.got, c.want) {
								t.Errorf("%s %s: %d procs, ws %d: %s differs from 1 proc's", g.name, convName(s), procs, n, c.what)
							}
						}
					}
				})
			}
		}
	}
}

// TestWinogradTransformsMatchGo: each implementation's transforms give
// the pure-Go ones' bits, at both chunk layouts.
func TestWinogradTransformsMatchGo(t *testing.T) {
	ref := genericWino()
	r := seedFor("transforms")
	const stride, plane = 70, 12 * 70
	src := randSlice(r, 3*plane)
	bias := randSlice(r, 3)
	for _, g := range gemmImpls(t) {
		for _, wk := range []winoWalk{
			{n: 2, rows: 3, step: 32, rowStep: 2 * stride, half: 16, chans: 3, chanStep: plane}, // rows of 32 tiles
			{n: 2, rows: 1, step: 4 * stride, half: 2 * stride, chans: 2, chanStep: plane},      // rows of 8 tiles
		} {
			name := fmt.Sprintf("%s %+v", g.name, wk)
			n := wk.chunks()
			size := 3 * 16 * 32 * n
			want, got := make([]float32, size), make([]float32, size)
			ref.input(src, stride, wk, want, 32*n, 32, 16)
			g.wino.input(src, stride, wk, got, 32*n, 32, 16)
			if !slices.Equal(got, want) {
				t.Errorf("%s: input transform differs from Go's", name)
			}
			m := randSlice(r, size)
			for _, b := range [][]float32{nil, bias} {
				want, got := make([]float32, len(src)), make([]float32, len(src))
				ref.output(m, 16*n, 16*16*n, want, stride, wk, b)
				g.wino.output(m, 16*n, 16*16*n, got, stride, wk, b)
				if !slices.Equal(got, want) {
					t.Errorf("%s: output transform (bias %v) differs from Go's", name, b != nil)
				}
			}
			want, got = make([]float32, size), make([]float32, size)
			ref.grad(src, stride, wk, want, 16*n, 16*16*n)
			g.wino.grad(src, stride, wk, got, 16*n, 16*16*n)
			if !slices.Equal(got, want) {
				t.Errorf("%s: gradient transform differs from Go's", name)
			}
		}
	}
}

// TestPlanConv: Direct never takes the Winograd way, Winograd always
// where the shape qualifies, and Auto only for wide layers: with its own
// workspace (the direct way's, or Winograd's shortest bands where more)
// every wide part, with the direct way's only what fits.
func TestPlanConv(t *testing.T) {
	for _, s := range append(append([]backend.ConvShape{}, winoShapes...), winoUNetShapes...) {
		direct := ConvWorkspace(s.Images(1))
		if p := PlanConv(withAlgo(s, backend.ConvDirect), direct); p.Any() {
			t.Errorf("%s: direct plans %+v", convName(s), p)
		}
		wino := withAlgo(s, backend.ConvWinograd)
		if p := PlanConv(wino, ConvWorkspace(wino.Images(1))); p != (ConvPlan{true, true, true}) {
			t.Errorf("%s: winograd plans %+v", convName(s), p)
		}
		auto := withAlgo(s, backend.ConvAuto)
		k := bestGemm().wino.wide
		products, grad := winoWide(s, k.products), winoWide(s, k.weightGrad)
		room := ConvWorkspace(auto.Images(1))
		if want := (ConvPlan{products, products, grad}); PlanConv(auto, room) != want {
			t.Errorf("%s: auto with its workspace (%d) plans %+v, want %+v", convName(s), room, PlanConv(auto, room), want)
		}
		if room < direct || room > ConvWorkspace(wino.Images(1)) || !(products || grad) && room != direct {
			t.Errorf("%s: auto's workspace %d, direct's %d, winograd's %d", convName(s), room, direct, ConvWorkspace(wino.Images(1)))
		}
		p := PlanConv(auto, direct)
		if !products && (p.Forward || p.InputGrad) || p.WeightGrad && !grad {
			t.Errorf("%s: auto takes the Winograd way for a narrow layer: %+v", convName(s), p)
		}
		if p.Forward && winoForwardRows(s.Images(1), direct) == 0 || p.WeightGrad && winoGradRows(s.Images(1), direct) == 0 {
			t.Errorf("%s: auto plans %+v beyond the workspace", convName(s), p)
		}
		t.Logf("%s: auto %+v", convName(s), p)
	}
	for _, s := range []backend.ConvShape{
		{N: 1, C: 16, H: 8, W: 8, OC: 16, K: 3, Pad: 1},  // rows of 4 tiles
		{N: 1, C: 16, H: 6, W: 16, OC: 16, K: 3, Pad: 1}, // rows of 8 tiles, an odd number of them
		{N: 1, C: 16, H: 7, W: 32, OC: 16, K: 3, Pad: 1}, // odd height
		{N: 1, C: 16, H: 8, W: 48, OC: 16, K: 3, Pad: 1}, // rows of 24 tiles
		{N: 1, C: 16, H: 8, W: 32, OC: 16, K: 5, Pad: 2}, // 5x5
		{N: 1, C: 16, H: 8, W: 32, OC: 16, K: 3, Pad: 0}, // no padding
		{N: 1, C: 16, H: 8, W: 32, OC: 16, K: 1, Pad: 0}, // 1x1
	} {
		if p := PlanConv(withAlgo(s, backend.ConvWinograd), ConvWorkspace(withAlgo(s, backend.ConvWinograd))); p.Any() {
			t.Errorf("%s does not qualify, but winograd plans %+v", convName(s), p)
		}
	}
}

// TestWinogradFilterTransforms holds the filter transform, flipped or
// not, and the weight gradient's G^T du G bit for bit to sums in the
// order the GEMMs take them (their products by K are exact, so the order
// alone sets the bits), on every implementation, with pairs that cross
// panels of 16 and blocks of winoAddCols mid-channel.
func TestWinogradFilterTransforms(t *testing.T) {
	K := winoFilterMatrix()
	for _, sh := range [][2]int{{3, 5}, {7, 16}, {16, 17}, {33, 48}, {48, 33}, {20, 90}} {
		s := backend.ConvShape{N: 1, C: sh[0], H: 4, W: 16, OC: sh[1], K: 3, Pad: 1, Algo: backend.ConvWinograd}
		r := seedFor(convName(s))
		w, dw0 := randSlice(r, s.WeightSize()), randSlice(r, s.WeightSize())
		ldU := winoPlaneLd(s.C * s.OC)
		du := randSlice(r, WinogradFilterSize(s))
		// u[ξ][pair] = sum over k of K[ξ][k] g[k], g the pair's kernel.
		wantU := func(flipped bool) []float32 {
			u := make([]float32, WinogradFilterSize(s))
			for o := range s.OC {
				for c := range s.C {
					g, p := w[(o*s.C+c)*9:(o*s.C+c)*9+9], o*s.C+c
					if flipped {
						p = c*s.OC + o
					}
					for xi := range winoXi {
						var acc float32
						for k := range 9 {
							v := g[k]
							if flipped {
								v = g[8-k]
							}
							acc += K[xi*9+k] * v
						}
						u[xi*ldU+p] = acc
					}
				}
			}
			return u
		}
		// dw[o][c][k] += sum over ξ of K[ξ][k] du[ξ][pair].
		wantDw := clone32(dw0)
		for o := range s.OC {
			for c := range s.C {
				p := o*s.C + c
				if !winoGradByOut(s) {
					p = c*s.OC + o
				}
				for k := range 9 {
					var acc float32
					for xi := range winoXi {
						acc += K[xi*9+k] * du[xi*ldU+p]
					}
					wantDw[(o*s.C+c)*9+k] += acc
				}
			}
		}
		for _, g := range gemmImpls(t) {
			g.team = NewTeam()
			g.strict = true
			ws := WinogradFilterSize(s) + winoWorkers()*winoAddScratch() + 16*(9*s.C*s.OC+winoXi*gemmKC)
			for _, flipped := range []bool{false, true} {
				want := wantU(flipped)
				u, _ := g.team.WinogradFilter(s, w, garbage(seedFor("ws"), ws), flipped)
				for i := range winoXi * s.C * s.OC {
					xi, p := i/(s.C*s.OC), i%(s.C*s.OC)
					if got := u[xi*ldU+p]; got != want[xi*ldU+p] {
						t.Fatalf("%s %+v flipped=%v: u[%d][%d] = %v, want %v", g.name, sh, flipped, xi, p, got, want[xi*ldU+p])
					}
				}
			}
			dw := clone32(dw0)
			g.team.WinogradWeightGradAdd(s, dw, du, garbage(seedFor("ws"), winoWorkers()*winoAddScratch()))
			for i := range dw {
				if dw[i] != wantDw[i] {
					t.Fatalf("%s %+v: dw[%d] = %v, want %v", g.name, sh, i, dw[i], wantDw[i])
				}
			}
		}
	}
}
