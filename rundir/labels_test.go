package rundir

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/predict"
)

// TestOneVolumeLabelsAndSliceSplit is the case a user met: one NIfTI
// volume whose background is value 1, whose value 0 marks stray voxels to
// ignore, with two structures (values 2 and 3). With data.labels {0:
// ignore, 1: 0, 2: 1, 3: 2} and data.split: slices it trains, and the
// means without background (val_dice_fg, val_miou_fg) are those computed
// here by hand from the predicted classes and the raw mask: over classes
// 1 and 2, ignored voxels left out.
func TestOneVolumeLabelsAndSliceSplit(t *testing.T) {
	const X, Y, Z = 16, 16, 40
	dims := [3]int{X, Y, Z}
	img, raw := make([]int16, X*Y*Z), make([]uint16, X*Y*Z)
	for z := range Z {
		for y := range Y {
			for x := range X {
				k := (z*Y+y)*X + x
				v, r := int16(100+(x*7+y*3+z)%11), uint16(1) // background: value 1
				switch {
				case (x-5)*(x-5)+(y-5)*(y-5) <= 9+z%3:
					v, r = 600, 2
				case x >= 9 && x < 14 && y >= 8 && y < 14:
					v, r = 1100, 3
				}
				if (x+y+z)%37 == 0 {
					r = 0 // a stray voxel to ignore
				}
				img[k], raw[k] = v+int16((x*y+z)%5), r
			}
		}
	}
	dir := t.TempDir()
	for _, sub := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := data.WriteInt16Volume(filepath.Join(dir, "images", "head.nii.gz"), dims, img); err != nil {
		t.Fatal(err)
	}
	if err := data.WriteLabelVolume(filepath.Join(dir, "masks", "head.nii.gz"), dims, raw); err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.Model.InChannels, c.Model.Classes, c.Model.Base, c.Model.Depth = 1, 3, 4, 2
	c.Data.Source, c.Data.Path, c.Data.ValFraction, c.Data.Split = data.SourceNIfTI, dir, 0.25, data.SplitSlices
	c.Data.Labels = data.Labels{0: data.LabelIgnore, 1: 0, 2: 1, 3: 2}
	c.Train.BatchSize, c.Train.Steps, c.Train.ValEvery, c.Train.LR = 4, 30, 0, 0.01
	c.Output.Progress = "none"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), c, Options{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := lastPredictor(t, sum)
	ds, idx, err := p.Split("val")
	if err != nil {
		t.Fatal(err)
	}
	// By hand: per class, intersections and sizes over the validation
	// slices' voxels whose raw value is not 0, from the raw mask.
	toClass := map[uint16]uint8{1: 0, 2: 1, 3: 2}
	var inter, pred, ref [3]float64
	zs := map[int]bool{}
	if _, err := p.PredictSplit(ds, idx, func(i int, classes, _ []uint8) error {
		name := data.SampleName(ds, i)
		z, err := strconv.Atoi(name[strings.LastIndex(name, "_z")+2:])
		if err != nil {
			return fmt.Errorf("sample name %q: %w", name, err)
		}
		zs[z] = true
		for y := range Y {
			for x := range X {
				r := raw[(z*Y+y)*X+x]
				if r == 0 {
					continue
				}
				want, got := toClass[r], classes[y*X+x]
				ref[want]++
				pred[got]++
				if want == got {
					inter[got]++
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var dice, iou float64
	for k := 1; k < 3; k++ {
		dice += 2 * inter[k] / (pred[k] + ref[k])
		iou += inter[k] / (pred[k] + ref[k] - inter[k])
	}
	dice, iou = dice/2, iou/2
	if math.Abs(sum.ValDiceFG-dice) > 1e-9 || math.Abs(sum.ValMIoUFG-iou) > 1e-9 {
		t.Errorf("means without background: Dice %v, IoU %v; by hand %v, %v", sum.ValDiceFG, sum.ValMIoUFG, dice, iou)
	}
	// The validation slices are one contiguous block of a quarter of the
	// volume's, and no training slice touches it.
	lo, hi := Z, -1
	for z := range zs {
		lo, hi = min(lo, z), max(hi, z)
	}
	if len(zs) != 10 || hi-lo+1 != 10 || len(sum.PerClass) != 3 {
		t.Errorf("validation slices %v: want one block of 10", zs)
	}
	// eval's per-case scores: the one volume's validation slices make one
	// case, whose Dice per class is the hand-computed one, with an HD95
	// for each class present in both.
	ev, err := p.Evaluate("val", false, predict.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.PerCase.Cases) != 1 || ev.PerCase.Cases[0].Case != "head" {
		t.Fatalf("cases %+v: want the one volume, head", ev.PerCase.Cases)
	}
	for k := 1; k < 3; k++ {
		cc := ev.PerCase.Cases[0].Classes[k]
		if want := 2 * inter[k] / (pred[k] + ref[k]); cc.Dice == nil || math.Abs(*cc.Dice-want) > 1e-9 || (inter[k] > 0 && cc.HD95 == nil) {
			t.Errorf("case head, class %d: Dice %v, HD95 %v; by hand Dice %v", k, cc.Dice, cc.HD95, want)
		}
	}
	if fg := ev.PerCase.MeanDiceFG; fg == nil || math.Abs(*fg-dice) > 1e-9 {
		t.Errorf("mean over cases without background %v, want %v", fg, dice)
	}
	t.Logf("val Dice without background %.3f (with %.3f), slices %d..%d", sum.ValDiceFG, sum.ValDice, lo, hi)
}

// TestRunSplitChecked: a run writes its split by sample name to
// split.json; eval of its checkpoint scores that split, and refuses, naming
// the file, a split that no longer matches it (here: the file edited as
// changed data would leave it), unless the data is named anew (--set).
func TestRunSplitChecked(t *testing.T) {
	c := config.Default()
	c.Model.Base, c.Model.Depth = 4, 2
	c.Data.Size, c.Data.Count = 16, 16
	c.Train.BatchSize, c.Train.Steps = 4, 2
	c.Output.Progress = "none"
	dir := t.TempDir()
	sum, err := Run(context.Background(), c, Options{OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var split data.SplitNames
	b, err := os.ReadFile(filepath.Join(dir, "split.json"))
	if err == nil {
		err = json.Unmarshal(b, &split)
	}
	if err != nil || len(split.Val) != 2 || len(split.Train) != 14 || !strings.HasPrefix(split.Val[0], "#") {
		t.Fatalf("split.json: %v %+v", err, split)
	}
	open := func() *predict.Predictor { return lastPredictor(t, sum) }
	if _, err := open().Evaluate("val", false, predict.Limits{}, nil); err != nil {
		t.Fatalf("eval of the run's own split: %v", err)
	}
	split.Val[0] = "#99"
	b, _ = json.Marshal(split)
	if err := os.WriteFile(filepath.Join(dir, "split.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := open().Evaluate("val", false, predict.Limits{}, nil); err == nil || !strings.Contains(err.Error(), "split.json) had 2; the first that differs") {
		t.Errorf("a changed split: %v", err)
	}
	if _, err := open().Evaluate("val", false, predict.Limits{}, []string{"data.count=16"}); err != nil {
		t.Errorf("a split of data named anew: %v", err)
	}
}

// lastPredictor is an fp32 predictor, batch 1, of a run's last
// checkpoint, closed at the test's end.
func lastPredictor(t *testing.T, sum *Summary) *predict.Predictor {
	t.Helper()
	ck, err := checkpoint.Open(sum.LastCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.NewPredictor(ck, backend.Float32, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
