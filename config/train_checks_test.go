package config

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestTrainChecks: each invalid optimizer, schedule or loss setting is
// refused by Validate, naming its key.
func TestTrainChecks(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Train)
		want string
	}{
		{func(t *Train) { t.Optimizer = "lamb" }, "train.optimizer"},
		{func(t *Train) { t.Optimizer, t.Nesterov, t.Momentum = "sgd", true, 0 }, "train.nesterov"},
		{func(t *Train) { t.Momentum = 1 }, "train.momentum"},
		{func(t *Train) { t.Optimizer, t.Alpha = "rmsprop", 1 }, "train.alpha"},
		{func(t *Train) { t.Schedule.Kind = "linear" }, "train.schedule.kind"},
		{func(t *Train) { t.Schedule.Kind, t.Schedule.StepSize = "step", 0 }, "step needs step_size"},
		{func(t *Train) { t.Schedule.Kind, t.Schedule.StepSize, t.Schedule.Gamma = "step", 3, 1.5 }, "step needs step_size"},
		{func(t *Train) { t.Schedule.Kind, t.Schedule.Warmup = "cosine", -1 }, "cosine needs warmup"},
		{func(t *Train) { t.Schedule.Kind, t.Schedule.MinLR = "cosine", 2*t.LR }, "cosine needs warmup"},
		{func(t *Train) { t.Schedule.Kind, t.ValEvery, t.Schedule.Factor = "plateau", 1, 1 }, "plateau needs patience"},
		{func(t *Train) { t.Schedule.Kind, t.ValEvery, t.Schedule.Patience = "plateau", 1, -1 }, "plateau needs patience"},
		{func(t *Train) { t.Schedule.Kind, t.Schedule.Power = "poly", 0 }, "poly needs a finite power > 0"},
		{func(t *Train) { t.Schedule.Kind, t.Schedule.Power = "poly", math.Inf(1) }, "poly needs a finite power > 0"},
		{func(t *Train) { t.ClipGradNorm = -1 }, "train.clip_grad_norm"},
		{func(t *Train) { t.ClipGradNorm = math.NaN() }, "train.clip_grad_norm"},
		{func(t *Train) { t.ClipGradNorm = math.Inf(1) }, "train.clip_grad_norm"},
		{func(t *Train) { t.Loss.Kind = "dise" }, "train.loss.kind"},
		{func(t *Train) { t.Loss.ClassWeights = ClassWeights{Values: []float64{1, 2}} }, "2 weights for 4 classes"},
		{func(t *Train) { t.Loss.ClassWeights = ClassWeights{Values: []float64{1, -2, 1, 1}} }, "class_weights[1]"},
		{func(t *Train) { t.Loss.ClassWeights = ClassWeights{Values: []float64{1, math.NaN(), 1, 1}} }, "class_weights[1]"},
		{func(t *Train) { t.Loss.Kind, t.Loss.Gamma = "focal", -1 }, "train.loss.gamma"},
		{func(t *Train) { t.Loss.Kind, t.Loss.DiceSmooth = "dice", math.Inf(1) }, "train.loss.dice_smooth"},
	} {
		c := Default()
		tc.edit(&c.Train)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.Train, err, tc.want)
		}
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("the default config: %v", err)
	}
}

// TestDerivedConfigsHaveNoValidate: the values Config derives for other
// packages are not checked again there; their keys are checked once, by
// Validate (the owner's Validate for data.* and model's architecture).
func TestDerivedConfigsHaveNoValidate(t *testing.T) {
	c := Default()
	for name, v := range map[string]any{
		"ModelConfig": c.ModelConfig(), "OptimizerConfig": c.OptimizerConfig(),
		"LRSchedule": c.LRSchedule(1), "LossConfig": c.LossConfig(nil),
	} {
		if _, ok := reflect.TypeOf(v).MethodByName("Validate"); ok && !promoted(reflect.TypeOf(v), "Validate") {
			t.Errorf("%s's %T has a Validate method: check its keys in config.Validate (or the section owner's) only", name, v)
		}
	}
}

// promoted reports whether t's method comes from an embedded section (as
// model.Config's Validate from model.Arch, the model section's owner).
func promoted(t reflect.Type, method string) bool {
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Anonymous {
			if _, ok := f.Type.MethodByName(method); ok {
				return true
			}
		}
	}
	return false
}
