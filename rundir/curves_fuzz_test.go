package rundir

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadCurves: metrics.jsonl as anything (a torn write, a hand edit,
// another program's file) is read or refused, never a panic, and what is
// read has as many values as steps (and validations).
func FuzzReadCurves(f *testing.F) {
	f.Add([]byte(`{"type":"step","step":1,"epoch":1,"loss":0.7,"lr":0.003}` + "\n" +
		`{"type":"val","step":1,"epoch":1,"val_loss":null,"val_pixel_acc":0.5,"val_miou":0.25,"val_dice":0.3}` + "\n"))
	f.Add([]byte(`{"type":"step","step":2,"loss":1e309}` + "\n" + `{"type":"val","step":` + "\n"))
	f.Add([]byte(`{"type":"resume","step":4}` + "\n" + `[1,2,3]` + "\n" + `{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "metrics.jsonl")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := ReadCurves(path)
		if err != nil {
			return
		}
		if len(c.Loss) != len(c.Steps) || len(c.LR) != len(c.Steps) {
			t.Fatalf("%d steps, %d losses, %d rates", len(c.Steps), len(c.Loss), len(c.LR))
		}
		if len(c.ValLoss) != len(c.ValSteps) || len(c.MIoU) != len(c.ValSteps) || len(c.Dice) != len(c.ValSteps) || len(c.PixelAcc) != len(c.ValSteps) {
			t.Fatalf("%d validations, %d/%d/%d/%d values", len(c.ValSteps), len(c.ValLoss), len(c.MIoU), len(c.Dice), len(c.PixelAcc))
		}
	})
}
