package data

import (
	"math"
	"strings"
	"sync"
	"testing"
)

func mustSynthetic(t testing.TB, cfg SyntheticConfig) *Synthetic {
	t.Helper()
	s, err := NewSynthetic(cfg)
	if err != nil {
		t.Fatalf("NewSynthetic(%+v): %v", cfg, err)
	}
	return s
}

func buffers(ds Dataset) ([]float32, []uint8) {
	h, w := ds.Size()
	return make([]float32, ds.Channels()*h*w), make([]uint8, h*w)
}

func sample(t testing.TB, ds Dataset, i int) ([]float32, []uint8) {
	t.Helper()
	img, mask := buffers(ds)
	if err := ds.Sample(i, img, mask); err != nil {
		t.Fatalf("Sample(%d): %v", i, err)
	}
	return img, mask
}

func equalSample(a []float32, am []uint8, b []float32, bm []uint8) bool {
	if len(a) != len(b) || len(am) != len(bm) {
		return false
	}
	for k := range a {
		if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
			return false
		}
	}
	return string(am) == string(bm)
}

func TestSyntheticDefaults(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{})
	got := s.Config()
	want := SyntheticConfig{Count: 256, Size: 64, Classes: 4, Noise: 0.1}
	if got != want {
		t.Fatalf("defaults: got %+v, want %+v", got, want)
	}
	if h, w := s.Size(); s.Len() != 256 || s.Channels() != 3 || s.Classes() != 4 || h != 64 || w != 64 {
		t.Fatalf("shape: Len %d Channels %d Classes %d Size %dx%d", s.Len(), s.Channels(), s.Classes(), h, w)
	}
}

func TestSyntheticValidate(t *testing.T) {
	ok := SyntheticConfig{Count: 4, Size: 32, Classes: 3, Noise: 0.1}
	tests := []struct {
		name  string
		edit  func(*SyntheticConfig)
		field string // "" = valid
		want  []string
	}{
		{"valid", func(c *SyntheticConfig) {}, "", nil},
		{"zero noise", func(c *SyntheticConfig) { c.Noise = 0 }, "", nil},
		{"min size", func(c *SyntheticConfig) { c.Size = 16 }, "", nil},
		{"two classes", func(c *SyntheticConfig) { c.Classes = 2 }, "", nil},
		{"count zero", func(c *SyntheticConfig) { c.Count = 0 }, "data.count", []string{"0", "at least 1"}},
		{"count negative", func(c *SyntheticConfig) { c.Count = -3 }, "data.count", []string{"-3", "at least 1"}},
		{"size small", func(c *SyntheticConfig) { c.Size = 15 }, "data.size", []string{"15", "between 16 and 4096"}},
		{"size huge", func(c *SyntheticConfig) { c.Size = 1 << 20 }, "data.size", []string{"1048576", "between 16 and 4096"}},
		{"classes one", func(c *SyntheticConfig) { c.Classes = 1 }, "data.classes", []string{"1", "between 2 and 4"}},
		{"classes five", func(c *SyntheticConfig) { c.Classes = 5 }, "data.classes", []string{"5", "between 2 and 4", "circle"}},
		{"noise negative", func(c *SyntheticConfig) { c.Noise = -0.5 }, "data.noise", []string{"-0.5", "between 0 and 1"}},
		{"noise big", func(c *SyntheticConfig) { c.Noise = 2 }, "data.noise", []string{"2", "between 0 and 1"}},
		{"noise NaN", func(c *SyntheticConfig) { c.Noise = math.NaN() }, "data.noise", []string{"NaN"}},
		{"noise Inf", func(c *SyntheticConfig) { c.Noise = math.Inf(1) }, "data.noise", []string{"+Inf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			err := cfg.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", cfg, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error naming %s", cfg, tt.field)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tt.field+": ") {
				t.Errorf("error %q does not start with the field %q", msg, tt.field)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			// NewSynthetic rejects the same config, except where a zero
			// takes a default.
			if _, err := NewSynthetic(cfg); err == nil && cfg.Count != 0 {
				t.Errorf("NewSynthetic(%+v) accepted an invalid config", cfg)
			}
		})
	}
}

func TestSyntheticSampleErrors(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 3, Size: 16})
	img, mask := buffers(s)
	tests := []struct {
		name string
		i    int
		img  []float32
		mask []uint8
		want string
	}{
		{"negative index", -1, img, mask, "out of range"},
		{"index past end", 3, img, mask, "out of range [0, 3)"},
		{"short image", 0, img[1:], mask, "image buffer"},
		{"long image", 0, append(img[:len(img):len(img)], 0), mask, "image buffer"},
		{"nil image", 0, nil, mask, "image buffer"},
		{"short mask", 0, img, mask[1:], "mask buffer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Sample(tt.i, tt.img, tt.mask)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Sample: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestSyntheticDeterministic(t *testing.T) {
	cfgs := []SyntheticConfig{
		{Count: 16, Size: 32, Classes: 4, Seed: 1},
		{Count: 16, Size: 17, Classes: 2, Seed: 99, Noise: 0.3},
	}
	for _, cfg := range cfgs {
		s := mustSynthetic(t, cfg)
		// Reference: forward order, one goroutine.
		refImg := make([][]float32, s.Len())
		refMask := make([][]uint8, s.Len())
		for i := range s.Len() {
			refImg[i], refMask[i] = sample(t, s, i)
		}
		t.Run("twice", func(t *testing.T) {
			for i := range s.Len() {
				img, mask := sample(t, s, i)
				if !equalSample(img, mask, refImg[i], refMask[i]) {
					t.Fatalf("sample %d differs on the second call", i)
				}
			}
		})
		t.Run("reverse order", func(t *testing.T) {
			for i := s.Len() - 1; i >= 0; i-- {
				img, mask := sample(t, s, i)
				if !equalSample(img, mask, refImg[i], refMask[i]) {
					t.Fatalf("sample %d differs when generated in reverse order", i)
				}
			}
		})
		t.Run("fresh dataset", func(t *testing.T) {
			s2 := mustSynthetic(t, cfg)
			img, mask := sample(t, s2, 7)
			if !equalSample(img, mask, refImg[7], refMask[7]) {
				t.Fatal("sample 7 differs in a second dataset of the same config")
			}
		})
		t.Run("goroutines", func(t *testing.T) {
			var wg sync.WaitGroup
			bad := make([]bool, 8*s.Len())
			for g := range 8 {
				wg.Go(func() {
					img, mask := buffers(s)
					for k := range s.Len() {
						i := (k*5 + g) % s.Len() // each goroutine its own order
						if err := s.Sample(i, img, mask); err != nil || !equalSample(img, mask, refImg[i], refMask[i]) {
							bad[g*s.Len()+k] = true
						}
					}
				})
			}
			wg.Wait()
			for k, b := range bad {
				if b {
					t.Fatalf("goroutine %d, call %d: sample differs", k/s.Len(), k%s.Len())
				}
			}
		})
		t.Run("samples differ", func(t *testing.T) {
			for i := 1; i < s.Len(); i++ {
				if equalSample(refImg[i], refMask[i], refImg[0], refMask[0]) {
					t.Fatalf("sample %d equals sample 0", i)
				}
			}
		})
	}
}

func TestSyntheticSeedsDiffer(t *testing.T) {
	tests := []struct{ a, b uint64 }{{0, 1}, {1, 2}, {42, 43}, {7, 1 << 40}}
	for _, tt := range tests {
		sa := mustSynthetic(t, SyntheticConfig{Count: 4, Size: 32, Seed: tt.a})
		sb := mustSynthetic(t, SyntheticConfig{Count: 4, Size: 32, Seed: tt.b})
		for i := range 4 {
			ia, ma := sample(t, sa, i)
			ib, mb := sample(t, sb, i)
			if string(ma) == string(mb) || equalSample(ia, ma, ib, mb) {
				t.Errorf("seeds %d and %d give the same sample %d", tt.a, tt.b, i)
			}
		}
	}
}

func TestSyntheticContent(t *testing.T) {
	tests := []struct {
		name string
		cfg  SyntheticConfig
	}{
		{"default", SyntheticConfig{Count: 64}},
		{"seed 7 size 32", SyntheticConfig{Count: 64, Size: 32, Seed: 7}},
		{"smallest", SyntheticConfig{Count: 64, Size: 16, Seed: 3}},
		{"two classes", SyntheticConfig{Count: 64, Size: 48, Classes: 2, Seed: 5}},
		{"three classes noisy", SyntheticConfig{Count: 64, Size: 40, Classes: 3, Seed: 11, Noise: 0.3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSynthetic(t, tt.cfg)
			counts := make([]int, 256)
			for i := range s.Len() {
				img, mask := sample(t, s, i)
				for k, v := range img {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("sample %d value %d is %v", i, k, v)
					}
					if v < (0-Mean)/Std || v > (1-Mean)/Std {
						t.Fatalf("sample %d value %d = %v outside the normalized range [-2, 2]", i, k, v)
					}
				}
				present := 0
				for _, m := range mask {
					counts[m]++
					if m != 0 {
						present++
					}
				}
				if present == 0 {
					t.Errorf("sample %d has no shape pixels", i)
				}
			}
			for m, n := range counts {
				if m >= s.Classes() && n > 0 {
					t.Fatalf("mask value %d (%d pixels) not below Classes %d", m, n, s.Classes())
				}
				if m < s.Classes() && n == 0 {
					t.Errorf("class %d never present over %d samples", m, s.Len())
				}
			}
			t.Logf("pixels per class: %v", counts[:s.Classes()])
		})
	}
}

// TestSyntheticNormalized checks Sample = (raw-0.5)/0.25 of the raw image
// and that Image returns the raw image and mask.
func TestSyntheticNormalized(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 3, Size: 24, Seed: 9})
	n := 24
	for i := range 3 {
		img, mask := sample(t, s, i)
		raw := make([]float32, 3*n*n)
		rm := make([]uint8, n*n)
		s.generate(i, raw, rm, nil)
		for k := range raw {
			if want := (raw[k] - 0.5) / 0.25; img[k] != want {
				t.Fatalf("sample %d value %d: %v, want (%v-0.5)/0.25 = %v", i, k, img[k], raw[k], want)
			}
			if d := Denormalize(img[k]) - raw[k]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("Denormalize(%v) = %v, want %v", img[k], Denormalize(img[k]), raw[k])
			}
		}
		rgba, gray, err := s.Image(i)
		if err != nil {
			t.Fatal(err)
		}
		if string(gray.Pix) != string(mask) {
			t.Fatalf("Image(%d) mask differs from Sample's", i)
		}
		for p := range n * n {
			for c := range 3 {
				if got, want := rgba.Pix[4*p+c], to8(raw[c*n*n+p]); got != want {
					t.Fatalf("Image(%d) pixel %d channel %d = %d, want %d", i, p, c, got, want)
				}
			}
		}
	}
	if _, _, err := s.Image(3); err == nil {
		t.Fatal("Image(3) of a 3-sample set: no error")
	}
}

// TestSyntheticShapeContrast checks that every shape's visible pixels differ
// from the background in mean intensity, with and without noise, that each
// shape's visible pixels carry its class, and that shapes do not touch.
func TestSyntheticShapeContrast(t *testing.T) {
	tests := []struct {
		name   string
		noise  float64
		minGap float64
	}{
		{"noise-free", 1e-9, minContrast - 1e-4},
		{"default noise", 0.1, 0.3},
		{"heavy noise", 0.3, 0.25}, // clamping at 0 and 1 pulls the means in
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSynthetic(t, SyntheticConfig{Count: 64, Size: 48, Seed: 21, Noise: tt.noise})
			n := 48
			raw := make([]float32, 3*n*n)
			mask := make([]uint8, n*n)
			owner := make([]int8, n*n)
			for i := range s.Len() {
				rng := newRand(s.cfg.Seed, uint64(i))
				_, shapes := s.shapes(rng)
				s.generate(i, raw, mask, owner)
				sum := make([]float64, len(shapes)+1) // index 0 = background
				cnt := make([]int, len(shapes)+1)
				for p := range n * n {
					o := int(owner[p]) + 1
					if o > 0 && mask[p] != shapes[o-1].class {
						t.Fatalf("sample %d pixel %d: mask %d, owner shape has class %d", i, p, mask[p], shapes[o-1].class)
					}
					if o == 0 && mask[p] != 0 {
						t.Fatalf("sample %d pixel %d: mask %d on background", i, p, mask[p])
					}
					sum[o] += float64(raw[p]+raw[n*n+p]+raw[2*n*n+p]) / 3
					cnt[o]++
				}
				if cnt[0] == 0 {
					t.Fatalf("sample %d has no background", i)
				}
				bg := sum[0] / float64(cnt[0])
				for k := 1; k < len(cnt); k++ {
					if cnt[k] == 0 {
						t.Fatalf("sample %d shape %d (class %d) has no visible pixel", i, k-1, shapes[k-1].class)
					}
					for j := 1; j < k; j++ {
						if shapes[k-1].touches(&shapes[j-1]) {
							t.Errorf("sample %d shapes %d and %d touch", i, j-1, k-1)
						}
					}
					if gap := math.Abs(sum[k]/float64(cnt[k]) - bg); gap < tt.minGap {
						t.Errorf("sample %d shape %d (class %d, %d px): mean intensity differs from background by %.3f, want >= %.2f",
							i, k-1, shapes[k-1].class, cnt[k], gap, tt.minGap)
					}
				}
			}
		})
	}
}

// TestSyntheticColorIndependentOfClass guards learnability from geometry:
// every shape kind comes both lighter and darker than the background.
func TestSyntheticColorIndependentOfClass(t *testing.T) {
	s := mustSynthetic(t, SyntheticConfig{Count: 200, Seed: 4})
	lighter := map[uint8]int{}
	darker := map[uint8]int{}
	for i := range s.Len() {
		bg, shapes := s.shapes(newRand(s.cfg.Seed, uint64(i)))
		for _, sh := range shapes {
			if sh.color[0]+sh.color[1]+sh.color[2] > bg[0]+bg[1]+bg[2] {
				lighter[sh.class]++
			} else {
				darker[sh.class]++
			}
		}
	}
	for c := uint8(1); c < 4; c++ {
		if lighter[c] < 20 || darker[c] < 20 {
			t.Errorf("class %d: %d lighter and %d darker than background; want both common", c, lighter[c], darker[c])
		}
	}
}
