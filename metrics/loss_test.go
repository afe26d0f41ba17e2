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
		want := `{"val_loss":` + tc.json + `,"val_pixel_acc":0,"val_miou":0.5,"val_dice":0,"val_miou_fg":0,"val_dice_fg":0}`
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

func TestBeatsNotFinite(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	half, none := 0.5, (*float64)(nil)
	for _, tc := range []struct {
		monitor string
		a       float64
		best    *float64
		want    bool
	}{
		{"val_loss", 0.4, &half, true}, {"val_loss", 0.7, &half, false}, {"val_loss", 0.7, none, true},
		{"val_loss", nan, &half, false}, {"val_loss", nan, none, false},
		{"val_loss", inf, none, false}, {"val_loss", -inf, &half, false},
		{"val_miou", 0.7, &half, true}, {"val_miou", 0.4, &half, false}, {"val_miou", nan, none, false},
	} {
		if got := Beats(tc.monitor, tc.a, tc.best, 0); got != tc.want {
			t.Errorf("Beats(%s, %v, %v) = %v, want %v", tc.monitor, tc.a, tc.best, got, tc.want)
		}
	}
}
