package rundir

import (
	"context"
	"math"
	"testing"

	"github.com/memunet/memunet/predict"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/model"
)

// TestVolumesTrainFromNIfTI: a 3D UNet trains from a folder of .nii.gz
// volumes (one channel, balls on a background) and learns them: the
// foreground's validation Dice ends far above the chance level of a
// guess in proportion (its share of the voxels, about 0.05).
func TestVolumesTrainFromNIfTI(t *testing.T) {
	syn, err := data.NewSyntheticExact(data.SyntheticConfig{Count: 12, Size: 16, Depth: 16, Classes: 2, Seed: 9, Noise: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := data.WriteVolumeFolder(syn, dir); err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.Model.Dims, c.Model.InChannels, c.Model.Classes, c.Model.Base, c.Model.Depth = 3, 1, 2, 4, 2
	c.Model.Norm, c.Model.Groups = model.NormGroup, 4
	c.Data.Source, c.Data.Path, c.Data.ValFraction = data.SourceNIfTI, dir, 0.25
	c.Train.BatchSize, c.Train.Steps, c.Train.ValEvery, c.Train.LR = 2, 40, 0, 0.01
	c.Train.Loss = config.Loss{Kind: "ce+dice", DiceSmooth: 1}
	c.Output.Progress = "none"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), c, Options{OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	fg := sum.PerClass[1]
	if fg.Dice == nil || *fg.Dice < 0.6 {
		t.Fatalf("foreground Dice %v after %d steps; per class %+v", fg.Dice, c.Train.Steps, sum.PerClass)
	}
	t.Logf("val Dice: foreground %.3f, mean %.3f", *fg.Dice, sum.ValDice)

	// eval of the last checkpoint scores the validation volumes as
	// training's last validation did.
	ev, err := lastPredictor(t, sum).Evaluate("val", false, predict.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(ev.ValDice-sum.ValDice) > 1e-9 || ev.Samples != 3 {
		t.Errorf("eval of %d volumes: Dice %v, training's last validation %v", ev.Samples, ev.ValDice, sum.ValDice)
	}
	// Each validation volume is a case, scored with its HD95 in mm.
	if len(ev.PerCase.Cases) != 3 || ev.PerCase.PerClass[1].HD95Cases != 3 || ev.PerCase.MeanDiceFG == nil {
		t.Errorf("per case: %d cases, %+v", len(ev.PerCase.Cases), ev.PerCase.PerClass)
	}
}
