package train

import (
	"math"
	"testing"

	"github.com/memunet/memunet/config"
)

// TestClassWeights: auto weights are pixels / (classes · class pixels)
// over the training masks (ignored pixels left out), 1 for every class of
// a balanced set, and the largest for a class with no pixel.
func TestClassWeights(t *testing.T) {
	c := config.Default()
	c.Data.Count, c.Data.Size = 12, 16
	set, err := OpenSet(c)
	if err != nil {
		t.Fatal(err)
	}
	K := c.Model.Classes + 1 // one class the synthetic masks never draw
	H, W := set.Data.Size()
	counts, total := make([]float64, K), 0.0
	image, mask := make([]float32, set.Data.Channels()*H*W), make([]uint8, H*W)
	for _, i := range set.Train {
		if err := set.Data.Sample(i, image, mask); err != nil {
			t.Fatal(err)
		}
		for _, v := range mask {
			if int(v) < K {
				counts[v]++
				total++
			}
		}
	}
	got, err := ClassWeights(set.Data, set.Train, K)
	if err != nil {
		t.Fatal(err)
	}
	largest := 0.0
	for k := range K - 1 {
		if counts[k] == 0 {
			t.Fatalf("class %d has no training pixel: the test needs every class but the last", k)
		}
		want := total / (float64(K) * counts[k])
		if math.Abs(got[k]-want) > 1e-12*want {
			t.Errorf("class %d: weight %v, want %v", k, got[k], want)
		}
		largest = max(largest, want)
	}
	if got[K-1] != largest {
		t.Errorf("absent class: weight %v, want the largest, %v", got[K-1], largest)
	}
	// The weighted pixel count is the same for every present class.
	for k := range K - 1 {
		if share := got[k] * counts[k] / total; math.Abs(share-1/float64(K)) > 1e-12 {
			t.Errorf("class %d carries %v of the weight, want %v", k, share, 1/float64(K))
		}
	}
}
