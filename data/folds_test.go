package data

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkPartition: over the k folds of n samples, every sample validates in
// exactly one fold, train and val of a fold are disjoint and together all
// n, and the folds' sizes differ by at most unit (a sample, or a volume's
// slices).
func checkPartition(t *testing.T, what string, n, k, unit int, fold func(f int) (train, val []int)) {
	t.Helper()
	validated := make([]int, n)
	lo, hi := n, 0
	for f := range k {
		train, val := fold(f)
		if !slices.IsSorted(train) || !slices.IsSorted(val) {
			t.Errorf("%s: fold %d not sorted", what, f)
		}
		if len(train)+len(val) != n {
			t.Errorf("%s: fold %d: %d train + %d val, want %d", what, f, len(train), len(val), n)
		}
		for _, i := range val {
			validated[i]++
			if _, found := slices.BinarySearch(train, i); found {
				t.Errorf("%s: fold %d: sample %d trains and validates", what, f, i)
			}
		}
		lo, hi = min(lo, len(val)), max(hi, len(val))
	}
	for i, c := range validated {
		if c != 1 {
			t.Errorf("%s: sample %d validates in %d folds, want 1", what, i, c)
		}
	}
	if hi-lo > unit {
		t.Errorf("%s: fold sizes from %d to %d", what, lo, hi)
	}
}

func TestFolds(t *testing.T) {
	for _, n := range []int{2, 3, 7, 10, 101} {
		for _, k := range []int{2, 3, 5} {
			if k > n {
				continue
			}
			checkPartition(t, "Folds", n, k, 1, func(f int) ([]int, []int) { return Folds(n, k, f, 9) })
		}
	}
	a, _ := Folds(50, 5, 2, 1)
	b, _ := Folds(50, 5, 2, 1)
	c, _ := Folds(50, 5, 2, 2)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("the same seed gives other folds, or another seed the same")
	}
	if tr, v := Folds(5, 3, 3, 1); len(tr)+len(v) != 0 {
		t.Errorf("a fold past k: %v %v", tr, v)
	}
	// Without data.folds, RandomSplit is Split.
	cfg := Config{ValFraction: 0.25, Seed: 4}
	tr, v := cfg.RandomSplit(20)
	tr2, v2 := Split(20, 0.25, 4)
	if !slices.Equal(tr, tr2) || !slices.Equal(v, v2) {
		t.Errorf("RandomSplit without folds is not Split")
	}
}

// TestFoldsSynthetic: the synthetic samples folded through Open.
func TestFoldsSynthetic(t *testing.T) {
	cfg := SourceConfig{Config: Config{Source: SourceSynthetic, Count: 11, Size: 16, Seed: 3, ValFraction: 0.125, Folds: 3}, Channels: 3, Classes: 4}
	checkPartition(t, "synthetic", 11, 3, 1, func(f int) ([]int, []int) {
		cfg.Fold = f
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		set := mustOpen(t, cfg)
		var text strings.Builder
		set.Report.Write(&text)
		if !strings.Contains(text.String(), "split by fold "+string(rune('0'+f))+" of 3 (data.fold, data.folds)") {
			t.Errorf("the report does not say the fold:\n%s", text.String())
		}
		return set.Train, set.Val
	})
}

// TestFoldsNIfTI: nifti volumes fold whole, read as slices or as volumes:
// every slice of a volume validates in the same fold, and every one once.
func TestFoldsNIfTI(t *testing.T) {
	dir := t.TempDir()
	writeNIfTISet(t, dir, 5, []int{8, 6, 5})
	cfg := niftiConfig(dir)
	cfg.Folds = 3
	var vols []string
	checkPartition(t, "nifti slices", 25, 3, 5, func(f int) ([]int, []int) {
		cfg.Fold = f
		set := mustOpen(t, cfg)
		vol := func(i int) string { return strings.Split(SampleName(set.Data, i), "_")[0] }
		inVal := map[string]bool{}
		for _, i := range set.Val {
			inVal[vol(i)] = true
		}
		for _, i := range set.Train {
			if inVal[vol(i)] {
				t.Errorf("fold %d: volume %s has slices in train and val", f, vol(i))
			}
		}
		vols = append(vols, slices.Sorted(func(yield func(string) bool) {
			for v := range inVal {
				if !yield(v) {
					return
				}
			}
		})...)
		return set.Train, set.Val
	})
	if slices.Sort(vols); len(vols) != 5 || len(slices.Compact(vols)) != 5 {
		t.Errorf("validating volumes over the folds: %v, want each of 5 once", vols)
	}

	dir3, _ := writeSyntheticVolumes(t, 4)
	cfg3 := volumeConfig(dir3)
	cfg3.Folds = 2
	checkPartition(t, "nifti volumes", 4, 2, 1, func(f int) ([]int, []int) {
		cfg3.Fold = f
		set := mustOpen(t, cfg3)
		return set.Train, set.Val
	})
}

// TestFoldsRefused: data.folds where the set has its own validation
// split, or fewer samples than folds, is refused naming the key and why;
// so are folds and fold out of range.
func TestFoldsRefused(t *testing.T) {
	root := t.TempDir()
	writeNIfTISet(t, filepath.Join(root, "train"), 3, []int{8, 6, 5})
	writeNIfTISet(t, filepath.Join(root, "val"), 1, []int{8, 6, 5})
	cfg := niftiConfig(root)
	cfg.Folds = 2
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "data.folds: 2: the set validates on its val/ folder, a split of its own") {
		t.Errorf("nifti val/ folder: %v", err)
	}
	folder := t.TempDir()
	grayFolder(t, filepath.Join(folder, "train"), 3, 8, 8, []uint8{0, 255})
	grayFolder(t, filepath.Join(folder, "val"), 1, 8, 8, []uint8{0, 255})
	fc := folderConfig(folder)
	fc.Folds = 2
	if _, err := Open(fc); err == nil || !strings.Contains(err.Error(), "data.folds: 2: the set validates on its val/ folder") {
		t.Errorf("folder val/ folder: %v", err)
	}
	voc := t.TempDir()
	vocLike(t, voc, [][2]int{{16, 16}, {16, 16}}, [][2]int{{16, 16}})
	vc := SourceConfig{Config: Config{Source: SourceVOC, Path: voc, ValFraction: 0.5, Seed: 1, Folds: 2}, Channels: 3, Classes: 3}
	if _, err := Open(vc); err == nil || !strings.Contains(err.Error(), "data.folds: 2: the set validates on ImageSets/Segmentation/val.txt, a split of its own") {
		t.Errorf("voc val.txt: %v", err)
	}
	flat := t.TempDir()
	grayFolder(t, flat, 3, 8, 8, []uint8{0, 255})
	fc = folderConfig(flat)
	fc.Folds = 4
	if _, err := Open(fc); err == nil || !strings.Contains(err.Error(), "data.folds: 4: the set has 3 samples to fold, fewer than the folds") {
		t.Errorf("4 folds of 3 files: %v", err)
	}
	few := t.TempDir()
	writeNIfTISet(t, few, 2, []int{8, 6, 5})
	cfg = niftiConfig(few)
	cfg.Folds, cfg.Fold = 3, 2
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "data.folds: 3: the set has 2 volumes to fold (whole, never by slice), fewer than the folds") {
		t.Errorf("3 folds of 2 volumes: %v", err)
	}
	syn := SourceConfig{Config: Config{Source: SourceSynthetic, Count: 8, Size: 16, ValFraction: 0.125}, Channels: 3, Classes: 4}
	for _, tc := range []struct {
		folds, fold int
		split, want string
	}{
		{1, 0, "", "data.folds: 1: 0 (no cross-validation) or the number of folds, 2 to 1000"},
		{-2, 0, "", "data.folds: -2"},
		{0, 1, "", "data.fold: 1: data.folds is 0"},
		{3, 3, "", "data.fold: 3: the fold that validates, 0 to 2 (data.folds 3)"},
		{9, 0, "", "data.folds: 9: more folds than data.count's 8 samples; every fold needs a sample to validate: use at most 8 folds, or raise data.count"},
	} {
		c := syn
		c.Folds, c.Fold = tc.folds, tc.fold
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("folds %d fold %d: %v, want %q", tc.folds, tc.fold, err, tc.want)
		}
	}
	sl := niftiConfig(few)
	sl.Folds, sl.Split = 2, SplitSlices
	if err := sl.Validate(); err == nil || !strings.Contains(err.Error(), "data.folds: 2: data.split is slices") {
		t.Errorf("data.split slices: %v", err)
	}
}
