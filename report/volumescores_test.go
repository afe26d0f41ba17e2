package report

import (
	"bytes"
	"testing"

	"github.com/memunet/memunet/predict"
)

// TestPrintVolumeScores: the summary gives the Dice over the volumes with
// and without background, then each volume's, "-" where undefined, and
// nothing where no volume was scored.
func TestPrintVolumeScores(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	rep := &predict.Report{
		Outputs: []predict.Output{
			{Input: "a.nii.gz", Score: &predict.VolumeScore{Dice: []*float64{f(0.99), f(0.5), nil}, MeanDice: f(0.745), MeanDiceForeground: f(0.5)}},
			{Input: "b.png"},
			{Input: "c.nii.gz", Score: &predict.VolumeScore{Dice: []*float64{f(1), nil, nil}, MeanDice: f(1)}},
		},
		VolumeScores: &predict.VolumeScores{Volumes: 2, Dice: []*float64{f(0.995), f(0.5), nil}, MeanDice: f(0.8725), MeanDiceForeground: f(0.5)},
	}
	var b bytes.Buffer
	PrintVolumeScores(&b, rep)
	want := "dice over 2 volumes: mean 0.8725 with background, 0.5000 without; per class 0 0.9950  1 0.5000  2 -\n" +
		"  a.nii.gz: mean 0.7450 with background, 0.5000 without; per class 0 0.9900  1 0.5000  2 -\n" +
		"  c.nii.gz: mean 1.0000 with background, - without; per class 0 1.0000  1 -  2 -\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	PrintVolumeScores(&b, &predict.Report{})
	if b.Len() != 0 {
		t.Errorf("no scores: %q", b.String())
	}
}
