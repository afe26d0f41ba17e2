package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFinetuneConfig runs configs/finetune.yaml's recipe at test size: a
// base run on the quickstart, then the fine-tuning config from it (a new
// 3-class head, CE + Dice with auto class weights, cosine, augmentation).
func TestFinetuneConfig(t *testing.T) {
	base, tuned := t.TempDir(), t.TempDir()
	runOK(t, append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", base, "--set", "output.progress=none"}, tinyArgs...)...)
	out := runOK(t, append([]string{"train", "--config", "../../configs/finetune.yaml", "--out", tuned, "--init", base,
		"--set", "output.progress=plain", "--set", "train.schedule.warmup=1"}, tinyArgs...)...)
	for _, want := range []string{
		"train.init: ", "left at their initialization (train.init_skip [outc])",
		"train.loss.class_weights: auto: [",
		"class       IoU     Dice",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fine-tuning output lacks %q:\n%s", want, out)
		}
	}
	sum := ckSummary(t, tuned)
	if sum.Loss != "ce+dice" || len(sum.ClassWeights) != 3 || len(sum.PerClass) != 3 || sum.Monitor != "val_dice" {
		t.Errorf("summary: loss %q, class weights %v, %d classes scored, monitor %q; want ce+dice, 3, 3, val_dice",
			sum.Loss, sum.ClassWeights, len(sum.PerClass), sum.Monitor)
	}
	metrics, err := os.ReadFile(filepath.Join(tuned, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The cosine schedule after one warmup step: the rate changes.
	if strings.Count(string(metrics), `"lr":0.001,`) != 1 {
		t.Errorf("the rate should reach train.lr once (after warmup) and then decay:\n%s", metrics)
	}
}

// TestTrainUnderMPIRunRefused: started by mpirun with 2 ranks, a build
// without MPI says how to build one and writes nothing (each rank would
// otherwise train alone into the same directory).
func TestTrainUnderMPIRunRefused(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	dir := filepath.Join(t.TempDir(), "run")
	code, _, errOut := runOut(append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", dir}, tinyArgs...)...)
	if code == 0 || !strings.Contains(errOut, "-tags mpi") {
		t.Errorf("train under mpirun: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused run made %s", dir)
	}
}

// TestNNUNet2DConfig runs configs/nnunet2d.yaml's recipe at test size: SGD
// with Nesterov momentum, the poly schedule over the run's 4 steps
// (0.01·(1 - t/4)^0.9), every step's gradient norm in metrics.jsonl
// (clipped at 12), CE + Dice, the best checkpoint by foreground Dice.
func TestNNUNet2DConfig(t *testing.T) {
	dir := t.TempDir()
	runOK(t, append([]string{"train", "--config", "../../configs/nnunet2d.yaml", "--out", dir, "--set", "output.progress=none"}, tinyArgs...)...)
	sum := ckSummary(t, dir)
	if sum.Loss != "ce+dice" || sum.Monitor != "val_dice_fg" || sum.Steps != 4 {
		t.Errorf("summary: loss %q, monitor %q, %d steps; want ce+dice, val_dice_fg, 4", sum.Loss, sum.Monitor, sum.Steps)
	}
	metrics, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	step := 0
	for line := range strings.Lines(string(metrics)) {
		var r struct {
			Type     string   `json:"type"`
			LR       float64  `json:"lr"`
			GradNorm *float64 `json:"grad_norm"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type != "step" {
			continue
		}
		if want := 0.01 * math.Pow(1-float64(step)/4, 0.9); math.Abs(r.LR-want) > 1e-15 {
			t.Errorf("step %d: lr %v, want poly's %v", step+1, r.LR, want)
		}
		if r.GradNorm == nil || !(*r.GradNorm > 0) {
			t.Errorf("step %d: grad_norm %v, want the norm clipping measured", step+1, r.GradNorm)
		}
		step++
	}
	if step != 4 {
		t.Errorf("%d steps in metrics.jsonl, want 4", step)
	}
}
