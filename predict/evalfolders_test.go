package predict

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/data"
)

func writeGrayPNG(t *testing.T, path string, w, h int, vals []uint8) {
	t.Helper()
	m := image.NewGray(image.Rect(0, 0, w, h))
	copy(m.Pix, vals)
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEvaluateFolders: eval --predictions --references matches cases by
// name (a PNG pair and a NIfTI pair), scores each label value as a class
// (hand-computed Dice), takes label 0 as the background, leaves out a
// prediction without a reference (predict's legend.png), and refuses a
// reference without a prediction, naming it.
func TestEvaluateFolders(t *testing.T) {
	preds, refs := t.TempDir(), t.TempDir()
	// labels 0 and 5: reference 5 at {2,3,5,6}, prediction at {1,2,3,6}.
	ref := []uint8{0, 0, 5, 5, 0, 5, 5, 0, 0, 0, 0, 0}
	pred := []uint8{0, 5, 5, 5, 0, 0, 5, 0, 0, 0, 0, 0}
	writeGrayPNG(t, filepath.Join(refs, "a.png"), 4, 3, ref)
	writeGrayPNG(t, filepath.Join(preds, "a.png"), 4, 3, pred)
	writeGrayPNG(t, filepath.Join(preds, "legend.png"), 2, 2, []uint8{1, 2, 3, 4})
	dims := [3]int{4, 3, 2}
	vol := make([]uint16, 24)
	for k := range 12 {
		vol[k], vol[12+k] = uint16(ref[k]), uint16(ref[k])
	}
	for _, dir := range []string{preds, refs} {
		if err := data.WriteLabelVolume(filepath.Join(dir, "b.nii.gz"), dims, vol); err != nil {
			t.Fatal(err)
		}
	}
	fe, err := EvaluateFolders(preds, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(fe.Cases) != 2 || fe.Cases[0].Case != "a" || fe.Cases[1].Case != "b" || len(fe.Labels) != 2 || fe.Labels[1] != 5 || fe.Background != 0 {
		t.Fatalf("cases %d, labels %v, background %d", len(fe.Cases), fe.Labels, fe.Background)
	}
	// a: label 5 Dice 2*3/(4+4); label 0 Dice 2*7/(8+8); b: identical, 1.
	if d := *fe.Cases[0].Classes[1].Dice; math.Abs(d-6.0/8) > 1e-12 {
		t.Errorf("case a, label 5: Dice %v, want 0.75", d)
	}
	if d := *fe.Cases[0].Classes[0].Dice; math.Abs(d-14.0/16) > 1e-12 {
		t.Errorf("case a, label 0: Dice %v, want 0.875", d)
	}
	if *fe.Cases[1].MeanDice != 1 || *fe.Cases[1].Classes[1].HD95 != 0 {
		t.Errorf("case b (identical): %+v", fe.Cases[1])
	}
	if fg := *fe.MeanDiceFG; math.Abs(fg-(6.0/8+1)/2) > 1e-12 {
		t.Errorf("mean over cases without background %v", fg)
	}
	var out bytes.Buffer
	if err := EvalFolders(preds, refs, "", nil, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(preds, "eval-cases.csv")); err != nil || !strings.Contains(out.String(), "2 cases: mean Dice") {
		t.Errorf("report: %v\n%s", err, out.String())
	}
	os.Remove(filepath.Join(preds, "a.png"))
	if _, err := EvaluateFolders(preds, refs); err == nil || !strings.Contains(err.Error(), filepath.Join(refs, "a.png")+" has no prediction") {
		t.Errorf("a reference without a prediction: %v", err)
	}
}
