package metrics

import (
	"encoding/json"
	"math"
	"testing"
)

func TestLossJSON(t *testing.T) {
	for _, tc := range []struct {
		loss Loss
		json string
	}{
		{0.25, "0.25"}, {-3, "-3"}, {1e300, "1e+300"},
		{Loss(math.NaN()), "null"}, {Loss(math.Inf(1)), "null"}, {Loss(math.Inf(-1)), "null"},
	} {
		b, err := json.Marshal(Validation{ValLoss: tc.loss, ValMIoU: 0.5})
		if err != nil {
			t.Fatalf("%v: %v", float64(tc.loss), err)
		}
		want := `{"val_loss":` + tc.json + `,"val_pixel_acc":0,"val_miou":0.5,"val_dice":0}`
		if string(b) != want {
			t.Errorf("%v: %s, want %s", float64(tc.loss), b, want)
		}
		var back Validation
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if tc.loss.Finite() && back.ValLoss != tc.loss || !tc.loss.Finite() && !math.IsNaN(float64(back.ValLoss)) {
			t.Errorf("%s read back as %v", b, float64(back.ValLoss))
		}
	}
	var v Validation
	if err := json.Unmarshal([]byte(`{"val_loss":"high"}`), &v); err == nil {
		t.Error(`val_loss "high" was read without an error`)
	}
}

func TestBetterWithNaN(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		monitor string
		a, b    float64
		want    bool
	}{
		{"val_loss", 0.5, 0.7, true}, {"val_loss", 0.7, 0.5, false},
		{"val_loss", nan, 0.5, false}, {"val_loss", 0.5, nan, true}, {"val_loss", nan, nan, false},
		{"val_miou", 0.7, 0.5, true}, {"val_miou", nan, 0.5, false}, {"val_miou", 0.1, nan, true},
	} {
		if got := Better(tc.monitor, tc.a, tc.b, 0); got != tc.want {
			t.Errorf("Better(%s, %v, %v) = %v, want %v", tc.monitor, tc.a, tc.b, got, tc.want)
		}
	}
}
