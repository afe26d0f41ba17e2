package data

import (
	"math"
	"testing"
)

// FuzzSyntheticConfig feeds arbitrary configs into Validate, NewSynthetic
// and Sample: nothing may panic, a config that validates must build, and a
// built set's samples must be well-formed.
func FuzzSyntheticConfig(f *testing.F) {
	f.Add(256, 64, 4, uint64(0), 0.1, 0)
	f.Add(1, 16, 2, uint64(1), 0.0, 0)
	f.Add(3, 17, 3, uint64(1<<63), 1.0, 2)
	f.Add(0, 0, 0, uint64(7), 0.0, -1)
	f.Add(-1, 15, 5, uint64(9), -0.1, 5)
	f.Add(10, 100000, 4, uint64(3), math.NaN(), math.MaxInt)
	f.Add(math.MaxInt, 4096, 4, uint64(3), math.Inf(1), math.MinInt)
	f.Fuzz(func(t *testing.T, count, size, classes int, seed uint64, noise float64, i int) {
		cfg := SyntheticConfig{Count: count, Size: size, Classes: classes, Seed: seed, Noise: noise}
		verr := cfg.WithDefaults().Validate()
		s, err := NewSynthetic(cfg)
		if (verr == nil) != (err == nil) {
			t.Fatalf("Validate says %v, NewSynthetic says %v", verr, err)
		}
		if err != nil {
			if s != nil {
				t.Fatal("NewSynthetic returned a set with an error")
			}
			return
		}
		if size > 128 || size < 0 {
			return // keep each run small; big sizes only exercise Validate
		}
		img, mask := buffers(s)
		err = s.Sample(i, img, mask)
		if inRange := i >= 0 && i < s.Len(); inRange != (err == nil) {
			t.Fatalf("Sample(%d) of %d samples: %v", i, s.Len(), err)
		}
		if err != nil {
			return
		}
		for _, v := range img {
			if math.IsNaN(float64(v)) || v < -2 || v > 2 {
				t.Fatalf("image value %v outside [-2, 2]", v)
			}
		}
		for _, m := range mask {
			if int(m) >= s.Classes() {
				t.Fatalf("mask value %d not below %d classes", m, s.Classes())
			}
		}
		// Wrong buffers are errors, not panics.
		if s.Sample(i, img[:len(img)/2], mask) == nil || s.Sample(i, img, nil) == nil {
			t.Fatal("wrong buffer sizes accepted")
		}
	})
}
