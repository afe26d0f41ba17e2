package data

import (
	"slices"
	"strings"
	"testing"
)

// TestSyntheticVolumes: model.dims 3 makes the synthetic set cubes of
// data.size voxels held as stacked slices; samples are deterministic, every
// solid kind appears, a solid's voxels carry its class and color, and the
// noise-free background is one color.
func TestSyntheticVolumes(t *testing.T) {
	cfg := SourceConfig{Config: Config{Source: SourceSynthetic, Count: 24, Size: 16, Noise: 1e-9, Seed: 3, ValFraction: 0.25}, Channels: 3, Classes: 4, Dims: 3, DepthMultiple: 4, SizeMultiple: 4}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	syn, err := NewSyntheticExact(cfg.Synthetic())
	if err != nil {
		t.Fatal(err)
	}
	if h, w := syn.Size(); h != 16*16 || w != 16 || DepthOf(syn) != 16 {
		t.Fatalf("Size %dx%d, depth %d: want 256x16 (16 slices of 16x16), depth 16", h, w, DepthOf(syn))
	}
	if d, h, w := SampleShape(syn); d != 16 || h != 16 || w != 16 {
		t.Fatalf("SampleShape = %d, %d, %d; want 16^3", d, h, w)
	}
	n := 16 * 16 * 16
	img, mask := make([]float32, 3*n), make([]uint8, n)
	img2, mask2 := make([]float32, 3*n), make([]uint8, n)
	voxels := make([]int, 4)
	for i := range syn.Len() {
		if err := syn.Sample(i, img, mask); err != nil {
			t.Fatal(err)
		}
		if err := syn.Sample(i, img2, mask2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(img, img2) || !slices.Equal(mask, mask2) {
			t.Fatalf("sample %d differs between two draws", i)
		}
		bg := -1 // a background voxel
		for v, m := range mask {
			voxels[m]++
			if m != ClassBackground {
				continue
			}
			if bg < 0 {
				bg = v
			}
			for c := range 3 {
				if img[c*n+v] != img[c*n+bg] {
					t.Fatalf("sample %d: background voxels %d and %d differ in channel %d", i, bg, v, c)
				}
			}
		}
		if bg < 0 {
			t.Fatalf("sample %d has no background", i)
		}
	}
	for k, v := range voxels {
		if v == 0 {
			t.Errorf("class %d has no voxel in %d volumes", k, syn.Len())
		}
	}
	// Each kind's share of the foreground is within 3x of the others'.
	if lo, hi := slices.Min(voxels[1:]), slices.Max(voxels[1:]); hi > 3*lo {
		t.Errorf("foreground voxels per class %v: the kinds are far from equal in volume", voxels[1:])
	}
}

// TestVolumesRefuse2DPreparations: what model.dims 3 cannot take is an
// error naming the key.
func TestVolumesRefuse2DPreparations(t *testing.T) {
	base := SourceConfig{Config: Config{Source: SourceSynthetic, Count: 8, Size: 16, Noise: 0.1, ValFraction: 0.25}, Channels: 3, Classes: 4, Dims: 3, DepthMultiple: 4, SizeMultiple: 4}
	for _, tc := range []struct {
		key  string
		edit func(c *SourceConfig)
	}{
		{"data.resize", func(c *SourceConfig) { c.Resize = []int{16, 16} }},
		{"data.scale", func(c *SourceConfig) { c.Scale = 0.5 }},
		{"data.patch", func(c *SourceConfig) { c.Patch = []int{8, 8} }},
		{"data.size", func(c *SourceConfig) { c.Size, c.DepthMultiple, c.SizeMultiple = 18, 4, 1 }},
		{"data.size", func(c *SourceConfig) { c.Size = 512 }},
		{"data.source", func(c *SourceConfig) { c.Source, c.Path, c.Channels = SourceFolder, "x", 3 }},
	} {
		c := base
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("%s: got %v, want an error naming it", tc.key, err)
		}
	}
}
