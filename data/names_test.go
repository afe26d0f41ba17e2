package data

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSampleNamesThroughWrappers: a folder sample's name is its image
// file's stem and a voc sample's its list id, also through data.scale and
// data.mean/std; SourceImages reaches the scaled pictures through
// normalization; synthetic samples have no names.
func TestSampleNamesThroughWrappers(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 4, 32, 24, []uint8{0, 255})
	voc := t.TempDir()
	vocLike(t, voc, [][2]int{{16, 16}, {16, 16}}, [][2]int{{16, 16}})
	scaled := folderConfig(dir)
	scaled.Scale = 0.5
	scaledNorm := scaled
	scaledNorm.Mean, scaledNorm.Std = []float64{0.5}, []float64{0.25}
	vocCfg := SourceConfig{Config: Config{Source: SourceVOC, Path: voc, ValFraction: 0.25, Seed: 1}, Channels: 3, Classes: 3}
	for _, tc := range []struct {
		name  string
		cfg   SourceConfig
		names []string
	}{
		{"folder", folderConfig(dir), []string{"00", "01", "02", "03"}},
		{"folder scaled", scaled, []string{"00", "01", "02", "03"}},
		{"folder scaled normalized", scaledNorm, []string{"00", "01", "02", "03"}},
		{"voc", vocCfg, []string{"2007_000000", "2007_000001", "2007_000002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mustOpen(t, tc.cfg)
			for i, want := range tc.names {
				if got := SampleName(set.Data, i); got != want {
					t.Errorf("sample %d: name %q, want %q", i, got, want)
				}
			}
			src, ok := SourceImages(set.Data)
			if !ok {
				t.Fatalf("%T: no source pictures", set.Data)
			}
			img, _, err := src.Image(1)
			if err != nil {
				t.Fatal(err)
			}
			h, w := set.Data.Size()
			if b := img.Bounds(); b.Dy() != h || b.Dx() != w {
				t.Errorf("picture %dx%d, dataset %dx%d", b.Dy(), b.Dx(), h, w)
			}
		})
	}
	syn := mustOpen(t, SourceConfig{Config: Config{Source: SourceSynthetic, ValFraction: 0.25, Seed: 1, Count: 4, Size: 16}, Channels: 3, Classes: 4})
	if got := SampleName(syn.Data, 0); got != "" {
		t.Errorf("synthetic sample named %q", got)
	}
}

// TestConfigNoiseZeroMeansNone: data.noise: 0 in a config is no noise, not
// the default 0.1 (Open takes the config's values as they are).
func TestConfigNoiseZeroMeansNone(t *testing.T) {
	cfg := SourceConfig{Config: Config{Source: SourceSynthetic, ValFraction: 0.25, Seed: 1, Count: 4, Size: 16}, Channels: 3, Classes: 4}
	quiet := mustOpen(t, cfg)
	exact, err := NewSyntheticExact(SyntheticConfig{Count: 4, Size: 16, Classes: 4, Seed: 1, Noise: 0})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Noise = 0.1
	noisy := mustOpen(t, cfg)
	a, m := buffers(quiet.Data)
	b, _ := buffers(exact)
	c, _ := buffers(noisy.Data)
	for i, ds := range []Dataset{quiet.Data, exact, noisy.Data} {
		if err := ds.Sample(2, [][]float32{a, b, c}[i], m); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(a, b) {
		t.Error("data.noise 0 through Open differs from a noise-free set")
	}
	if slices.Equal(a, c) {
		t.Error("data.noise 0.1 gave the noise-free samples")
	}
}

// TestClassValues: each class's raw mask value, as training read it (a scan
// or data.mask_values); nil where classes are their own values.
func TestClassValues(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
	if got := mustOpen(t, folderConfig(dir)).Report.ClassValues(2); !slices.Equal(got, []int{0, 255}) {
		t.Errorf("0/255 masks: %v", got)
	}
	cfg := folderConfig(dir)
	cfg.MaskValues = []int{255, 0} // class 0 is white
	if got := mustOpen(t, cfg).Report.ClassValues(2); !slices.Equal(got, []int{255, 0}) {
		t.Errorf("mask_values [255, 0]: %v", got)
	}
	voc := t.TempDir()
	vocLike(t, voc, [][2]int{{16, 16}, {16, 16}}, [][2]int{{16, 16}})
	if got := mustOpen(t, SourceConfig{Config: Config{Source: SourceVOC, Path: voc, ValFraction: 0.25, Seed: 1}, Channels: 3, Classes: 3}).Report.ClassValues(3); got != nil {
		t.Errorf("voc: %v", got)
	}
	syn := mustOpen(t, SourceConfig{Config: Config{Source: SourceSynthetic, ValFraction: 0.25, Seed: 1, Count: 4, Size: 16}, Channels: 3, Classes: 4})
	if got := syn.Report.ClassValues(4); got != nil {
		t.Errorf("synthetic: %v", got)
	}
}

// TestSplitFolders: a folder set laid out as train/, val/ and test/ is split
// by its folders (test samples apart: never trained or validated on);
// without val/, validation comes from train/ by data.val_fraction.
func TestSplitFolders(t *testing.T) {
	root := t.TempDir()
	grayFolder(t, filepath.Join(root, "train"), 6, 16, 16, []uint8{0, 255})
	grayFolder(t, filepath.Join(root, "val"), 3, 16, 16, []uint8{0, 255})
	grayFolder(t, filepath.Join(root, "test"), 2, 16, 16, []uint8{0, 255})
	set := mustOpen(t, folderConfig(root))
	if !slices.Equal(set.Train, []int{0, 1, 2, 3, 4, 5}) || !slices.Equal(set.Val, []int{6, 7, 8}) || !slices.Equal(set.Test, []int{9, 10}) {
		t.Errorf("train %v, val %v, test %v", set.Train, set.Val, set.Test)
	}
	if n := SampleName(set.Data, 9); n != "00" {
		t.Errorf("test sample name %q", n)
	}
	var b strings.Builder
	set.Report.Write(&b)
	if !strings.Contains(b.String(), "(train 6, val 3, test 2, split by the train/ val/ test/ folders)") {
		t.Errorf("report: %s", b.String())
	}

	if err := os.RemoveAll(filepath.Join(root, "val")); err != nil {
		t.Fatal(err)
	}
	cfg := folderConfig(root)
	cfg.ValFraction = 0.5
	set = mustOpen(t, cfg)
	if len(set.Train)+len(set.Val) != 6 || len(set.Val) != 3 || !slices.Equal(set.Test, []int{6, 7}) {
		t.Errorf("without val/: train %v, val %v, test %v", set.Train, set.Val, set.Test)
	}
}
