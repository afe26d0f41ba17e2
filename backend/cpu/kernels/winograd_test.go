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

// winoAbs is the absolute-value transforms of a tile's error bound:
// |B^T| (n x n), |G| (n x 3), |A^T| (m x n), n = m+2.
type winoAbs struct {
	m, n  int
	BT, G [][]float64
	AT    [][]float64
}

func absOf(rows ...[]float64) [][]float64 {
	out := make([][]float64, len(rows))
	for i, r := range rows {
		out[i] = make([]float64, len(r))
		for j, v := range r {
			out[i][j] = math.Abs(v)
		}
	}
	return out
}

func winoAbsOf(m WinoTile) winoAbs {
	if m == Wino4 {
		G := make([][]float64, 6)
		for i := range G {
			G[i] = winoG4[i][:]
		}
		return winoAbs{m: 4, n: 6,
			BT: absOf([]float64{4, 0, -5, 0, 1, 0}, []float64{0, -4, -4, 1, 1, 0}, []float64{0, 4, -4, -1, 1, 0},
				[]float64{0, -2, -1, 2, 1, 0}, []float64{0, 2, -1, -2, 1, 0}, []float64{0, 4, 0, -5, 0, 1}),
			G:  absOf(G...),
			AT: absOf([]float64{1, 1, 1, 1, 1, 0}, []float64{0, 1, -1, 2, -2, 0}, []float64{0, 1, 1, 4, 4, 0}, []float64{0, 1, -1, 8, -8, 1}),
		}
	}
	return winoAbs{m: 2, n: 4,
		BT: absOf([]float64{1, 0, -1, 0}, []float64{0, 1, 1, 0}, []float64{0, -1, 1, 0}, []float64{0, 1, 0, -1}),
		G:  absOf([]float64{1, 0, 0}, []float64{0.5, 0.5, 0.5}, []float64{0.5, -0.5, 0.5}, []float64{0, 0, 1}),
		AT: absOf([]float64{1, 1, 1, 0}, []float64{0, 1, -1, -1}),
	}
}

func square(n int) [][]float64 {
	v := make([][]float64, n)
	for i := range v {
		v[i] = make([]float64, n)
	}
	return v
}

// inputTile is |B^T| |d| |B| of x's window at tile (ty, tx) of plane (H
// x W, padding 1).
func (a winoAbs) inputTile(plane []float64, H, W, ty, tx int) [][]float64 {
	d, v := square(a.n), square(a.n)
	for r := range a.n {
		for c := range a.n {
			y, x := a.m*ty+r-1, a.m*tx+c-1
			if y >= 0 && y < H && x >= 0 && x < W {
				d[r][c] = math.Abs(plane[y*W+x])
			}
		}
	}
	for i := range a.n {
		for j := range a.n {
			for r := range a.n {
				for c := range a.n {
					v[i][j] += a.BT[i][r] * d[r][c] * a.BT[j][c]
				}
			}
		}
	}
	return v
}

// filterTile is |G| |g| |G^T| of a 3x3 kernel.
func (a winoAbs) filterTile(g []float64) [][]float64 {
	u := square(a.n)
	for i := range a.n {
		for j := range a.n {
			for r := range 3 {
				for c := range 3 {
					u[i][j] += a.G[i][r] * math.Abs(g[3*r+c]) * a.G[j][c]
				}
			}
		}
	}
	return u
}

// winoBoundForward is E of the package comment for each output of s with
// m x m tiles: sum over c of |A^T| (|G||g||G^T| ⊙ |B^T||d||B|) |A|.
func winoBoundForward(s backend.ConvShape, m WinoTile, in, w []float64) []float64 {
	a := winoAbsOf(m)
	TH, TW, HW := s.H/a.m, s.W/a.m, s.H*s.W
	us := make([][][]float64, s.OC*s.C)
	for i := range us {
		us[i] = a.filterTile(w[9*i : 9*i+9])
	}
	e := make([]float64, s.OutSize())
	vs := make([][][]float64, s.C)
	for n := range s.N {
		for ty := range TH {
			for tx := range TW {
				for c := range s.C {
					vs[c] = a.inputTile(in[(n*s.C+c)*HW:], s.H, s.W, ty, tx)
				}
				for o := range s.OC {
					p := square(a.n)
					for c := range s.C {
						u := us[o*s.C+c]
						for i := range a.n {
							for j := range a.n {
								p[i][j] += u[i][j] * vs[c][i][j]
							}
						}
					}
					for y := range a.m {
						for x := range a.m {
							var sum float64
							for i := range a.n {
								for j := range a.n {
									sum += a.AT[y][i] * p[i][j] * a.AT[x][j]
								}
							}
							e[(n*s.OC+o)*HW+(a.m*ty+y)*s.W+a.m*tx+x] = sum
						}
					}
				}
			}
		}
	}
	return e
}

// winoBoundWeightGrad is the weight gradient's E with m x m tiles for
// each dw[o][c][i][j]: |G^T| (sum over tiles of |A||dY||A^T| ⊙
// |B^T||d||B|) |G|.
func winoBoundWeightGrad(s backend.ConvShape, m WinoTile, in, dout []float64) []float64 {
	a := winoAbsOf(m)
	TH, TW, HW := s.H/a.m, s.W/a.m, s.H*s.W
	sum := make([][][]float64, s.OC*s.C)
	for i := range sum {
		sum[i] = square(a.n)
	}
	vs := make([][][]float64, s.C)
	for n := range s.N {
		for ty := range TH {
			for tx := range TW {
				for c := range s.C {
					vs[c] = a.inputTile(in[(n*s.C+c)*HW:], s.H, s.W, ty, tx)
				}
				for o := range s.OC {
					dm := square(a.n) // |A| |dY| |A^T|
					for i := range a.n {
						for j := range a.n {
							for y := range a.m {
								for x := range a.m {
									dm[i][j] += a.AT[y][i] * math.Abs(dout[(n*s.OC+o)*HW+(a.m*ty+y)*s.W+a.m*tx+x]) * a.AT[x][j]
								}
							}
						}
					}
					for c := range s.C {
						p := sum[o*s.C+c]
						for i := range a.n {
							for j := range a.n {
								p[i][j] += dm[i][j] * vs[c][i][j]
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
				for i := range a.n {
					for j := range a.n {
						e[9*k+3*r+c] += a.G[i][r] * p[i][j] * a.G[j][c]
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
// of s under g with m x m tiles and a workspace of ws values.
type winoRun struct {
	out, din, dw []float32
}

func runWinograd(g gemmImpl, s backend.ConvShape, m WinoTile, in, w, bias, dout, dw0 []float32, ws int) winoRun {
	work := garbage(seedFor("ws"), ws)
	u, rest := g.team.WinogradFilter(s, m, w, work, false)
	out := garbage(seedFor("out"), s.OutSize())
	g.winogradConv(s, m, out, Float32Image(in), u, bias, rest)
	fillGarbage(seedFor("ws"), work)
	uf, rest := g.team.WinogradFilter(s, m, w, work, true)
	din := garbage(seedFor("din"), s.InSize())
	g.winogradConv(WinogradSwapped(s), m, din, Float32Image(dout), uf, nil, rest)
	fillGarbage(seedFor("ws"), work)
	du, rest := g.carve(work, WinogradFilterSize(s, m))
	clear(du)
	g.winogradWeightGrad(s, m, du, dout, Float32Image(in), rest)
	dw := clone32(dw0)
	g.team.WinogradWeightGradAdd(s, m, dw, du, rest)
	return winoRun{out, din, dw}
}

// winoWorkspace is the workspace of s's Winograd parts with m x m tiles,
// at their preferred band heights.
func winoWorkspace(s backend.ConvShape, m WinoTile) int {
	one, unlimited := s.Images(1), int(^uint(0)>>1)
	return max(ConvWorkspace(withAlgo(s, backend.ConvWinograd)),
		winoForwardNeed(one, m, winoForwardRows(one, m, unlimited)),
		winoForwardNeed(WinogradSwapped(one), m, winoForwardRows(WinogradSwapped(one), m, unlimited)),
		winoGradNeed(one, m, winoGradRows(one, m, unlimited)))
}

// testWinogradShape holds every implementation's Winograd forward, input
// and weight gradients (the products with m x m tiles) to the float64
// direct convolution within the stated bound, and returns the worst
// ratio of error to bound.
func testWinogradShape(t *testing.T, s backend.ConvShape, m WinoTile) float64 {
	r := seedFor(convName(s))
	in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
	dout, dw0 := randSlice(r, s.OutSize()), randSlice(r, s.WeightSize())
	in64, w64, dout64 := to64(in), to64(w), to64(dout)
	out64 := make([]float64, s.OutSize())
	Conv2dNaive(s, out64, in64, w64, to64(bias))
	din64, dw64 := make([]float64, s.InSize()), to64(dw0)
	Conv2dBackwardNaive(s, din64, dw64, nil, dout64, in64, w64)
	eOut := winoBoundForward(s, m, in64, w64)
	eDin := winoBoundForward(WinogradSwapped(s), m, dout64, flipTranspose(s, w64))
	eDw := winoBoundWeightGrad(s, m, in64, dout64)
	const u = 0x1p-24
	slabs := func(k int) float64 { return float64(ceilDiv(k, gemmKC)) }
	steps := 16.0 // the transforms' roundings (winograd.go, winograd4.go)
	if m == Wino4 {
		steps = 32
	}
	gOut := (float64(s.C) + steps + slabs(s.C)) * u
	gDin := (float64(s.OC) + steps + slabs(s.OC)) * u
	gDw := (float64(m.gradSlab()) + float64(s.N*ceilDiv(s.H/int(m)*s.W/int(m), m.gradSlab())) + 2*steps) * u
	worst := 0.0
	for _, g := range gemmImpls(t) {
		g.team = NewTeam()
		g.strict = true
		got := runWinograd(g, s, m, in, w, bias, dout, dw0, winoWorkspace(s, m))
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
			testWinogradShape(t, s, Wino2)
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
			t.Logf("worst |error|/bound %.3f", testWinogradShape(t, s, Wino2))
		})
	}
}

// winoShapes4 are convolutions F(4x4,3x3) takes: rows of 16k tiles and
// of 8, channels that fill the kernels' panels and that do not, more
// channels than a k slab, bands cut short at the bottom.
var winoShapes4 = []backend.ConvShape{
	{N: 2, C: 5, H: 8, W: 32, OC: 7, K: 3, Pad: 1},
	{N: 1, C: 16, H: 12, W: 64, OC: 16, K: 3, Pad: 1},
	{N: 1, C: 300, H: 8, W: 64, OC: 9, K: 3, Pad: 1},
	{N: 1, C: 9, H: 8, W: 64, OC: 270, K: 3, Pad: 1},
	{N: 2, C: 32, H: 36, W: 128, OC: 40, K: 3, Pad: 1},
}

func TestWinograd4MatchesDirect(t *testing.T) {
	for _, s := range winoShapes4 {
		t.Run(convName(s), func(t *testing.T) {
			if !winoTileOK(s, Wino4) {
				t.Fatalf("%+v does not qualify", s)
			}
			testWinogradShape(t, s, Wino4)
		})
	}
}

// TestWinograd4ErrorBound: at the seed UNet's widths F(4x4,3x3) takes,
// every output of the products is within (C+32+slabs)·u·E of the exact
// convolution (winograd4.go); it logs the worst error against the direct
// kernels', relative to the outputs' magnitudes, beside F(2x2,3x3)'s.
func TestWinograd4ErrorBound(t *testing.T) {
	for _, s := range winoUNetShapes {
		if !winoTileOK(s, Wino4) {
			continue
		}
		t.Run(convName(s), func(t *testing.T) {
			t.Logf("worst |error|/bound %.3f", testWinogradShape(t, s, Wino4))
			// The forward's largest error, relative to the largest output,
			// direct and both tiles (the fastest implementation).
			r := seedFor(convName(s))
			in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
			want := make([]float64, s.OutSize())
			Conv2dNaive(s, want, to64(in), to64(w), to64(bias))
			relErr := func(got []float32) float64 {
				e, y := 0.0, 0.0
				for i, v := range got {
					e, y = max(e, math.Abs(float64(v)-want[i])), max(y, math.Abs(want[i]))
				}
				return e / y
			}
			g := gemmImpls(t)[len(gemmImpls(t))-1]
			g.team = NewTeam()
			direct := make([]float32, s.OutSize())
			g.team.Conv2d(s, direct, in, w, bias, make([]float32, ConvWorkspace(s)))
			errs := []float64{relErr(direct)}
			for _, m := range []WinoTile{Wino2, Wino4} {
				ws := garbage(seedFor("ws"), winoWorkspace(s, m))
				u, rest := g.team.WinogradFilter(s, m, w, ws, false)
				out := make([]float32, s.OutSize())
				g.winogradConv(s, m, out, Float32Image(in), u, bias, rest)
				errs = append(errs, relErr(out))
			}
			t.Logf("%s forward, max |error| / max |y|: direct %.2g, F(2x2,3x3) %.2g, F(4x4,3x3) %.2g (%.1fx F(2x2,3x3)'s)",
				g.name, errs[0], errs[1], errs[2], errs[2]/errs[1])
			// The weight gradient's likewise.
			dout := randSlice(r, s.OutSize())
			want = make([]float64, s.WeightSize())
			Conv2dBackwardNaive(s, nil, want, nil, to64(dout), to64(in), to64(w))
			direct = make([]float32, s.WeightSize())
			g.team.Conv2dBackward(s, nil, direct, nil, dout, in, w, make([]float32, ConvWorkspace(s)))
			errs = []float64{relErr(direct)}
			for _, m := range []WinoTile{Wino2, Wino4} {
				ws := garbage(seedFor("ws"), winoWorkspace(s, m))
				du, rest := g.carve(ws, WinogradFilterSize(s, m))
				clear(du)
				g.winogradWeightGrad(s, m, du, dout, Float32Image(in), rest)
				dw := make([]float32, s.WeightSize())
				g.team.WinogradWeightGradAdd(s, m, dw, du, rest)
				errs = append(errs, relErr(dw))
			}
			t.Logf("%s weight gradient, max |error| / max |dw|: direct %.2g, F(2x2,3x3) %.2g, F(4x4,3x3) %.2g (%.1fx F(2x2,3x3)'s)",
				g.name, errs[0], errs[1], errs[2], errs[2]/errs[1])
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
		for _, m := range autoTiles(s) {
			R := min(s.H/int(m), winoGradUnit(s.W/int(m), m)) // the least band
			tight, padded := winoGradNeedLd(one, m, R, false), winoGradNeed(one, m, R)
			if R == 0 || winoGradRows(one, m, tight) != R || winoGradRows(one, m, tight-1) != 0 || tight >= padded {
				t.Fatalf("%s %dx%d tiles: band %d, unpadded need %d, padded %d, rows at them %d, %d", convName(s), m, m, R, tight, padded, winoGradRows(one, m, tight), winoGradRows(one, m, tight-1))
			}
			for _, g := range gemmImpls(t) {
				g.strict, g.team = true, NewTeam()
				dw := func(ws int) []float32 {
					work := garbage(seedFor("ws"), ws)
					du, rest := g.carve(work, WinogradFilterSize(s, m))
					clear(du)
					g.winogradWeightGrad(s, m, du, dout, Float32Image(in), rest)
					out := clone32(dw0)
					g.team.WinogradWeightGradAdd(s, m, out, du, rest)
					return out
				}
				if !slices.Equal(dw(tight), dw(padded)) {
					t.Errorf("%s %s %dx%d tiles: the weight gradient with unpadded rows differs from the padded rows'", g.name, convName(s), m, m)
				}
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
		{N: 1, C: 8, H: 68, W: 128, OC: 16, K: 3, Pad: 1},
	} {
		r := seedFor(convName(s))
		in, w, bias := randSlice(r, s.InSize()), randSlice(r, s.WeightSize()), randSlice(r, s.OC)
		dout, dw0 := randSlice(r, s.OutSize()), randSlice(r, s.WeightSize())
		for _, m := range autoTiles(s) {
			for _, g := range gemmImpls(t) {
				g.team = NewTeam()
				var ref winoRun
				for i, procs := range []int{1, 2, 7} {
					withProcs(procs, func() {
						one, tw := s.Images(1), s.W/int(m)
						ws := winoWorkspace(s, m)
						// The least workspace each part takes, and more.
						least := max(winoForwardNeed(one, m, rowStep(tw)), winoForwardNeed(WinogradSwapped(one), m, rowStep(tw)))
						for _, n := range []int{ws, least, ws + 1000} {
							if n == least && winoGradRows(one, m, n) == 0 {
								continue
							}
							got := runWinograd(g, s, m, in, w, bias, dout, dw0, n)
							if i == 0 && n == ws {
								ref = got
								continue
							}
							for _, c := range []struct {
								what      string
								got, want []float32
							}{{"forward", got.out, ref.out}, {"input gradient", got.din, ref.din}, {"weight gradient", got.dw, ref.dw}} {
								if !slices.Equal(c.got, c.want) {
									t.Errorf("%s %s %dx%d tiles: %d procs, ws %d: %s differs from 1 proc's", g.name, convName(s), m, m, procs, n, c.what)
								}
							}
						}
					})
				}
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
			{n: 2, rows: 3, step: 32, rowStep: 2 * stride, half: 16, chans: 3, chanStep: plane, tile: 2}, // rows of 32 tiles
			{n: 2, rows: 1, step: 4 * stride, half: 2 * stride, chans: 2, chanStep: plane, tile: 2},      // rows of 8 tiles
		} {
			name := fmt.Sprintf("%s %+v", g.name, wk)
			n := wk.chunks()
			size := 3 * 16 * 32 * n
			want, got := make([]float32, size), make([]float32, size)
			ref.f2.input(src, stride, wk, want, 32*n, 32, 16)
			g.wino.f2.input(src, stride, wk, got, 32*n, 32, 16)
			if !slices.Equal(got, want) {
				t.Errorf("%s: input transform differs from Go's", name)
			}
			m := randSlice(r, size)
			for _, b := range [][]float32{nil, bias} {
				want, got := make([]float32, len(src)), make([]float32, len(src))
				ref.f2.output(m, 16*n, 16*16*n, want, stride, wk, b)
				g.wino.f2.output(m, 16*n, 16*16*n, got, stride, wk, b)
				if !slices.Equal(got, want) {
					t.Errorf("%s: output transform (bias %v) differs from Go's", name, b != nil)
				}
			}
			want, got = make([]float32, size), make([]float32, size)
			ref.f2.grad(src, stride, wk, want, 16*n, 16*16*n)
			g.wino.f2.grad(src, stride, wk, got, 16*n, 16*16*n)
			if !slices.Equal(got, want) {
				t.Errorf("%s: gradient transform differs from Go's", name)
			}
		}
	}
}

// TestWinograd4TransformsMatchGo: each implementation's F(4x4,3x3)
// transforms give the pure-Go ones' bits, at both chunk layouts, the
// image rows not a multiple of a vector apart.
func TestWinograd4TransformsMatchGo(t *testing.T) {
	ref := genericWino()
	r := seedFor("transforms4")
	const stride, plane = 134, 20 * 134
	src := randSlice(r, 3*plane)
	bias := randSlice(r, 3)
	for _, g := range gemmImpls(t) {
		for _, wk := range []winoWalk{
			winoWalkOf(4, 32, 3, stride, 3, plane), // rows of 32 tiles
			winoWalkOf(4, 8, 4, stride, 2, plane),  // rows of 8 tiles
		} {
			name := fmt.Sprintf("%s %+v", g.name, wk)
			chan_ := 16 * wk.chunks()
			xiStride := chan_ * wk.chans
			size := winoXi4 * xiStride
			want, got := garbage(seedFor("v"), size), garbage(seedFor("v"), size)
			ref.f4.input(src, stride, wk, want, xiStride, 16, chan_)
			g.wino.f4.input(src, stride, wk, got, xiStride, 16, chan_)
			if !slices.Equal(got, want) {
				t.Errorf("%s: input transform differs from Go's", name)
			}
			if left := countSame(got, garbage(seedFor("v"), size)); left != 0 {
				t.Errorf("%s: the input transform left %d of %d values unwritten", name, left, size)
			}
			m := randSlice(r, size)
			for _, b := range [][]float32{nil, bias} {
				want, got := garbage(seedFor("y"), len(src)), garbage(seedFor("y"), len(src))
				ref.f4.output(m, xiStride, chan_, want, stride, wk, b)
				g.wino.f4.output(m, xiStride, chan_, got, stride, wk, b)
				if !slices.Equal(got, want) {
					t.Errorf("%s: output transform (bias %v) differs from Go's", name, b != nil)
				}
				// 16 outputs a tile, 16 tiles a chunk.
				if wrote := len(src) - countSame(got, garbage(seedFor("y"), len(src))); wrote != wk.chans*wk.chunks()*256 {
					t.Errorf("%s: the output transform wrote %d values, want %d", name, wrote, wk.chans*wk.chunks()*256)
				}
			}
			want, got = garbage(seedFor("v"), size), garbage(seedFor("v"), size)
			ref.f4.grad(src, stride, wk, want, xiStride, chan_)
			g.wino.f4.grad(src, stride, wk, got, xiStride, chan_)
			if !slices.Equal(got, want) {
				t.Errorf("%s: gradient transform differs from Go's", name)
			}
			if left := countSame(got, garbage(seedFor("v"), size)); left != 0 {
				t.Errorf("%s: the gradient transform left %d of %d values unwritten", name, left, size)
			}
		}
	}
}

// countSame is how many values of a equal b's.
func countSame(a, b []float32) int {
	n := 0
	for i := range a {
		if a[i] == b[i] {
			n++
		}
	}
	return n
}

// TestWinograd4Reference: the pure-Go F(4x4,3x3) transforms are B^T d B,
// A^T M A and A dY A^T of the package comment's matrices, within float32's
// rounding, and the filter matrix is G ⊗ G.
func TestWinograd4Reference(t *testing.T) {
	BT := [6][6]float64{{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
		{0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}}
	AT := [4][6]float64{{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}
	r := seedFor("reference4")
	// One chunk of 16 tiles, rows of 64 floats: tile l at 4l.
	const stride = 70
	src := randSlice(r, 6*stride)
	wk := winoWalkOf(4, 16, 1, stride, 1, 6*stride)
	v := make([]float32, winoXi4*16)
	winoInput4Go(src, stride, wk, v, 16, 16, 16)
	for l := range 16 {
		for i := range 6 {
			for j := range 6 {
				var want, mag float64
				for a := range 6 {
					for b := range 6 {
						x := float64(src[a*stride+4*l+b])
						want += BT[i][a] * x * BT[j][b]
						mag += math.Abs(BT[i][a] * x * BT[j][b])
					}
				}
				if got := float64(v[(6*i+j)*16+winoLane4(l)]); math.Abs(got-want) > 8*0x1p-24*mag {
					t.Fatalf("tile %d: V[%d][%d] = %v, want %v", l, i, j, got, want)
				}
			}
		}
	}
	mm := randSlice(r, winoXi4*16)
	y := make([]float32, 4*stride)
	winoOutput4Go(mm, 16, 16, y, stride, wk, nil)
	for l := range 16 {
		for a := range 4 {
			for b := range 4 {
				var want, mag float64
				for i := range 6 {
					for j := range 6 {
						p := AT[a][i] * float64(mm[(6*i+j)*16+winoLane4(l)]) * AT[b][j]
						want += p
						mag += math.Abs(p)
					}
				}
				if got := float64(y[a*stride+4*l+b]); math.Abs(got-want) > 8*0x1p-24*mag {
					t.Fatalf("tile %d: Y[%d][%d] = %v, want %v", l, a, b, got, want)
				}
			}
		}
	}
	dy := randSlice(r, 4*stride)
	dm := make([]float32, winoXi4*16)
	winoGrad4Go(dy, stride, wk, dm, 16, 16)
	for l := range 16 {
		for i := range 6 {
			for j := range 6 {
				var want, mag float64
				for a := range 4 {
					for b := range 4 {
						p := AT[a][i] * float64(dy[a*stride+4*l+b]) * AT[b][j]
						want += p
						mag += math.Abs(p)
					}
				}
				if got := float64(dm[(6*i+j)*16+winoLane4(l)]); math.Abs(got-want) > 8*0x1p-24*mag {
					t.Fatalf("tile %d: dM[%d][%d] = %v, want %v", l, i, j, got, want)
				}
			}
		}
	}
	K := winoFilterMatrix(Wino4)
	for xi := range winoXi4 {
		for k := range 9 {
			want := winoG4[xi/6][k/3] * winoG4[xi%6][k%3]
			if got := float64(K[xi*9+k]); got != float64(float32(want)) {
				t.Fatalf("K[%d][%d] = %v, want %v", xi, k, got, want)
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
		if p := PlanConv(wino, ConvWorkspace(wino.Images(1))); p != (ConvPlan{true, true, true, Wino2, Wino2}) {
			t.Errorf("%s: winograd plans %+v", convName(s), p)
		}
		auto := withAlgo(s, backend.ConvAuto)
		k := bestGemm().wino.wide
		products, grad := winoWide(s, k.products), winoWide(s, k.weightGrad)
		room := ConvWorkspace(auto.Images(1))
		want := ConvPlan{products, products, grad, 0, 0}
		if products {
			want.Tile = autoTiles(s)[0] // F(4x4,3x3) where the shape takes it
		}
		if grad {
			want.GradTile = autoGradTile(s.Images(1))
		}
		if PlanConv(auto, room) != want {
			t.Errorf("%s: auto with its workspace (%d) plans %+v, want %+v", convName(s), room, PlanConv(auto, room), want)
		}
		if most := winoWorkspace(s.Images(1), autoTiles(s)[0]); room < direct || room > most || !(products || grad) && room != direct {
			t.Errorf("%s: auto's workspace %d, direct's %d, winograd's %d", convName(s), room, direct, most)
		}
		p := PlanConv(auto, direct)
		if !products && (p.Forward || p.InputGrad) || p.WeightGrad && !grad {
			t.Errorf("%s: auto takes the Winograd way for a narrow layer: %+v", convName(s), p)
		}
		if p.Forward && winoForwardRows(s.Images(1), p.Tile, direct) == 0 || p.WeightGrad && winoGradRows(s.Images(1), p.GradTile, direct) == 0 {
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

// TestPlanConvWhateverTheCores: Auto's choice in its own workspace, the
// tiles included, is the shape's: the same on 1 to 7 cores (the bits
// depend on it).
func TestPlanConvWhateverTheCores(t *testing.T) {
	shapes := append(append([]backend.ConvShape{}, winoUNetShapes...), winoShapes4...)
	for _, s := range append(shapes, backend.ConvShape{N: 1, C: 256, H: 32, W: 32, OC: 256, K: 3, Pad: 1}, backend.ConvShape{N: 1, C: 768, H: 32, W: 32, OC: 256, K: 3, Pad: 1}) {
		s = withAlgo(s, backend.ConvAuto)
		var want ConvPlan
		for i, procs := range []int{2, 1, 3, 5, 7} {
			withProcs(procs, func() {
				got := PlanConv(s, ConvWorkspace(s.Images(1)))
				if i == 0 {
					want = got
				} else if got != want {
					t.Errorf("%s: %d cores plan %+v, 2 cores %+v", convName(s), procs, got, want)
				}
			})
		}
	}
}

// TestWinogradFilterTransforms holds the filter transform, flipped or
// not, and the weight gradient's G^T du G bit for bit to sums in the
// order the GEMMs take them (their products by K are exact, so the order
// alone sets the bits), on every implementation, with pairs that cross
// panels of 16 and blocks of winoAddCols mid-channel.
func TestWinogradFilterTransforms(t *testing.T) {
	K := winoFilterMatrix(Wino2)
	for _, sh := range [][2]int{{3, 5}, {7, 16}, {16, 17}, {33, 48}, {48, 33}, {20, 90}} {
		s := backend.ConvShape{N: 1, C: sh[0], H: 4, W: 16, OC: sh[1], K: 3, Pad: 1, Algo: backend.ConvWinograd}
		r := seedFor(convName(s))
		w, dw0 := randSlice(r, s.WeightSize()), randSlice(r, s.WeightSize())
		ldU := winoPlaneLd(s.C * s.OC)
		du := randSlice(r, WinogradFilterSize(s, Wino2))
		// u[ξ][pair] = sum over k of K[ξ][k] g[k], g the pair's kernel.
		wantU := func(flipped bool) []float32 {
			u := make([]float32, WinogradFilterSize(s, Wino2))
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
			ws := WinogradFilterSize(s, Wino2) + winoWorkers()*winoAddScratch(Wino2) + 16*(9*s.C*s.OC+winoXi*gemmKC)
			for _, flipped := range []bool{false, true} {
				want := wantU(flipped)
				u, _ := g.team.WinogradFilter(s, Wino2, w, garbage(seedFor("ws"), ws), flipped)
				for i := range winoXi * s.C * s.OC {
					xi, p := i/(s.C*s.OC), i%(s.C*s.OC)
					if got := u[xi*ldU+p]; got != want[xi*ldU+p] {
						t.Fatalf("%s %+v flipped=%v: u[%d][%d] = %v, want %v", g.name, sh, flipped, xi, p, got, want[xi*ldU+p])
					}
				}
			}
			dw := clone32(dw0)
			g.team.WinogradWeightGradAdd(s, Wino2, dw, du, garbage(seedFor("ws"), winoWorkers()*winoAddScratch(Wino2)))
			for i := range dw {
				if dw[i] != wantDw[i] {
					t.Fatalf("%s %+v: dw[%d] = %v, want %v", g.name, sh, i, dw[i], wantDw[i])
				}
			}
		}
	}
}
