package metrics

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bruteHD95 is HD95 by brute force: every pair of surface voxels.
func bruteHD95(pred, ref []uint8, c uint8, dims [3]int, sp [3]float64) (float64, bool) {
	sa, sb := surface(pred, c, dims), surface(ref, c, dims)
	pos := func(k int) [3]float64 {
		return [3]float64{float64(k%dims[0]) * sp[0], float64(k/dims[0]%dims[1]) * sp[1], float64(k/(dims[0]*dims[1])) * sp[2]}
	}
	directed := func(from, to []bool) []float64 {
		var out []float64
		for i, f := range from {
			if !f {
				continue
			}
			best := math.Inf(1)
			for j, t := range to {
				if t {
					a, b := pos(i), pos(j)
					best = min(best, math.Sqrt((a[0]-b[0])*(a[0]-b[0])+(a[1]-b[1])*(a[1]-b[1])+(a[2]-b[2])*(a[2]-b[2])))
				}
			}
			out = append(out, best)
		}
		return out
	}
	ab, ba := directed(sa, sb), directed(sb, sa)
	if len(ab) == 0 || len(ba) == 0 {
		return 0, false
	}
	return max(percentile(ab, 95), percentile(ba, 95)), true
}

// TestHD95MatchesBruteForce: the distance transform's HD95 equals the
// brute-force one on random blobs in 2D and 3D, odd sizes and
// anisotropic spacing included, and is undefined where a mask lacks the
// class.
func TestHD95MatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for _, tc := range []struct {
		dims    [3]int
		spacing [3]float64
	}{
		{[3]int{17, 13, 1}, [3]float64{1, 1, 1}},
		{[3]int{9, 11, 7}, [3]float64{0.8, 0.8, 3}},
		{[3]int{12, 5, 10}, [3]float64{1, 2, 0.5}},
	} {
		n := tc.dims[0] * tc.dims[1] * tc.dims[2]
		for trial := range 5 {
			pred, ref := make([]uint8, n), make([]uint8, n)
			for _, m := range [][]uint8{pred, ref} {
				cx, cy, cz := rng.Float64()*float64(tc.dims[0]), rng.Float64()*float64(tc.dims[1]), rng.Float64()*float64(tc.dims[2])
				r := 2 + rng.Float64()*3
				for k := range m {
					x, y, z := float64(k%tc.dims[0]), float64(k/tc.dims[0]%tc.dims[1]), float64(k/(tc.dims[0]*tc.dims[1]))
					if (x-cx)*(x-cx)+(y-cy)*(y-cy)+(z-cz)*(z-cz) < r*r || rng.IntN(40) == 0 {
						m[k] = 1
					}
				}
			}
			got, ok := HD95(pred, ref, 1, tc.dims, tc.spacing)
			want, wok := bruteHD95(pred, ref, 1, tc.dims, tc.spacing)
			if ok != wok || math.Abs(got-want) > 1e-9 {
				t.Errorf("%v trial %d: HD95 %v (%v), brute force %v (%v)", tc.dims, trial, got, ok, want, wok)
			}
		}
		if _, ok := HD95(make([]uint8, n), make([]uint8, n), 1, tc.dims, tc.spacing); ok {
			t.Errorf("%v: HD95 of an absent class is defined", tc.dims)
		}
	}
}

// TestScoreCase: a hand-computed case: 2 classes in a 4x3 image, one
// ignored voxel; Dice, IoU and voxel counts per class, the means with and
// without background, and HD95 of identical masks 0.
func TestScoreCase(t *testing.T) {
	ref := []uint8{
		0, 0, 1, 1,
		0, 1, 1, 255,
		0, 0, 0, 0}
	pred := []uint8{
		0, 1, 1, 1,
		0, 0, 1, 1,
		0, 0, 0, 0}
	cs := ScoreCase("a", pred, ref, [3]int{4, 3, 1}, [3]float64{1, 1, 1}, 2, 0)
	// class 1: ref {2,3,5,6} (4), pred {1,2,3,6} (4; 7 is ignored), inter {2,3,6} = 3.
	// class 0: ref 7 voxels, pred 7 (0,4,5,8..11), inter 6 (0,4,8..11).
	want := []struct{ dice, iou float64 }{{12.0 / 14, 6.0 / 8}, {6.0 / 8, 3.0 / 5}}
	for c, w := range want {
		cc := cs.Classes[c]
		if math.Abs(*cc.Dice-w.dice) > 1e-12 || math.Abs(*cc.IoU-w.iou) > 1e-12 {
			t.Errorf("class %d: Dice %v IoU %v, want %v %v", c, *cc.Dice, *cc.IoU, w.dice, w.iou)
		}
	}
	if cs.Classes[1].RefVoxels != 4 || cs.Classes[1].PredVoxels != 4 {
		t.Errorf("class 1 voxels %d, %d", cs.Classes[1].RefVoxels, cs.Classes[1].PredVoxels)
	}
	if math.Abs(*cs.MeanDice-(12.0/14+6.0/8)/2) > 1e-12 || math.Abs(*cs.MeanDiceFG-6.0/8) > 1e-12 {
		t.Errorf("means %v, %v", *cs.MeanDice, *cs.MeanDiceFG)
	}
	same := ScoreCase("b", ref, ref, [3]int{4, 3, 1}, [3]float64{1, 1, 1}, 2, 0)
	if *same.Classes[1].HD95 != 0 || *same.MeanDice != 1 {
		t.Errorf("identical masks: HD95 %v, Dice %v", *same.Classes[1].HD95, *same.MeanDice)
	}
	per, all, fg := CaseMeans([]CaseScore{cs, same}, 2)
	if math.Abs(*per[1].Dice-(6.0/8+1)/2) > 1e-12 || per[1].DiceCases != 2 || math.Abs(*fg-(6.0/8+1)/2) > 1e-12 || all == nil {
		t.Errorf("means over cases: %+v, %v, %v", per[1], *all, *fg)
	}
}
