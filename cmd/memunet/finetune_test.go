package main

import (
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
