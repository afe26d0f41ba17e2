package cpu

import (
	"math"
	"math/rand"
	"testing"

	"github.com/memunet/memunet/backend/cpu/kernels"
)

func refBilinearTaps(n int) (i0, i1 []int, w0, w1 []float32) {
	i0, i1 = make([]int, 2*n), make([]int, 2*n)
	w0, w1 = make([]float32, 2*n), make([]float32, 2*n)
	for d := range 2 * n {
		src := max((float32(d)+0.5)*0.5-0.5, 0)
		lo := int(src)
		lambda := src - float32(lo)
		i0[d], i1[d] = lo, min(lo+1, n-1)
		w0[d], w1[d] = 1-lambda, lambda
	}
	return
}

func TestUpsampleSeparableMatchesTapRule(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, hw := range [][2]int{{1, 1}, {1, 5}, {4, 1}, {2, 3}, {7, 6}, {16, 16}} {
		H, W := hw[0], hw[1]
		x := make([]float32, H*W)
		for i := range x {
			x[i] = r.Float32()*2 - 1
		}
		g := make([]float32, 4*H*W)
		for i := range g {
			g[i] = r.Float32()*2 - 1
		}
		y0, y1, wy0, wy1 := refBilinearTaps(H)
		x0, x1, wx0, wx1 := refBilinearTaps(W)
		want := make([]float32, 4*H*W)
		wantd := make([]float32, H*W)
		for oy := range 2 * H {
			for ox := range 2 * W {
				want[oy*2*W+ox] = wy0[oy]*(wx0[ox]*x[y0[oy]*W+x0[ox]]+wx1[ox]*x[y0[oy]*W+x1[ox]]) + wy1[oy]*(wx0[ox]*x[y1[oy]*W+x0[ox]]+wx1[ox]*x[y1[oy]*W+x1[ox]])
				v := g[oy*2*W+ox]
				wantd[y0[oy]*W+x0[ox]] += wy0[oy] * wx0[ox] * v
				wantd[y0[oy]*W+x1[ox]] += wy0[oy] * wx1[ox] * v
				wantd[y1[oy]*W+x0[ox]] += wy1[oy] * wx0[ox] * v
				wantd[y1[oy]*W+x1[ox]] += wy1[oy] * wx1[ox] * v
			}
		}
		got := make([]float32, 4*H*W)
		for i := range H {
			row := x[i*W : (i+1)*W]
			up, down := x[max(i-1, 0)*W:], x[min(i+1, H-1)*W:]
			kernels.UpsampleRow(got[2*i*2*W:], up[:W], row, 0.25, 0.75)
			kernels.UpsampleRow(got[(2*i+1)*2*W:], row, down[:W], 0.75, 0.25)
		}
		gotd := make([]float32, H*W)
		grow := func(oy int) []float32 { return g[oy*2*W : (oy+1)*2*W] }
		for i := range H {
			kernels.UpsampleRowAdjoint(gotd[i*W:(i+1)*W], grow(max(2*i-1, 0)), grow(2*i), grow(2*i+1), grow(min(2*i+2, 2*H-1)))
		}
		for i := range want {
			if math.Abs(float64(want[i]-got[i])) > 1e-6 {
				t.Fatalf("%dx%d fwd %d: %v want %v", H, W, i, got[i], want[i])
			}
		}
		for i := range wantd {
			if math.Abs(float64(wantd[i]-gotd[i])) > 1e-5 {
				t.Fatalf("%dx%d bwd %d: %v want %v", H, W, i, gotd[i], wantd[i])
			}
		}
	}
}
