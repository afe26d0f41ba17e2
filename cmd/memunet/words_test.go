package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWordsThatGuide: each mistake issue 49 names ("Words that guide"),
// with the message that now answers it: the exit status and the exact
// suggestion, in one line.
func TestWordsThatGuide(t *testing.T) {
	dir := t.TempDir()
	yamlFile := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(yamlFile, []byte("train:\n  steps: 10\n  batchsize: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shapes := filepath.Join(dir, "shapes")
	runOK(t, "data", "synth", "--out", shapes, "--count", "1", "--size", "16")
	qs := "../../configs/quickstart.yaml"
	for _, tc := range []struct {
		mistake string // as the issue says it
		args    []string
		code    int
		want    string // was: the usage line, or every key, alone
	}{
		{"a mistyped flag (--steps 100)", []string{"train", "--config", qs, "--steps", "100"}, 2,
			"memunet: train: unknown flag --steps; did you mean --set train.steps=100?; usage: memunet train --config FILE"},
		{"--steps=100", []string{"train", "--config", qs, "--steps=100"}, 2,
			"train: unknown flag --steps; did you mean --set train.steps=100?"},
		{"a mistyped flag of predict", []string{"predict", "--chekpoint", "runs/q", "--input", "x.png"}, 2,
			"predict: unknown flag --chekpoint; did you mean --checkpoint?"},
		{"a mistyped flag of eval", []string{"eval", "--checkpoint", "runs/q", "--splt", "val"}, 2,
			"eval: unknown flag --splt; did you mean --split?"},
		{"--set steps=100 listed the sections", []string{"train", "--config", qs, "--set", "steps=100"}, 1,
			`--set: unknown key "steps" in the top level; did you mean --set train.steps=100? known keys: cuda, data,`},
		{"--set train.batchsize listed every key", []string{"train", "--config", qs, "--set", "train.batchsize=4"}, 1,
			`--set: unknown key "train.batchsize" in train; did you mean --set train.batch_size=4? known keys:`},
		{"a mistyped key in a YAML file", []string{"train", "--config", yamlFile}, 1,
			`typo.yaml: line 3: unknown key "train.batchsize" in train; did you mean train.batch_size? known keys:`},
		{"a negative fold count read as a missing one", []string{"cv", "--config", qs, "--folds", "-1"}, 2,
			"--folds -1: the number of folds is 2 or more, e.g. --folds 5"},
		{"one fold", []string{"cv", "--config", qs, "--folds", "1"}, 2,
			"--folds 1: the number of folds is 2 or more, e.g. --folds 5"},
		{"a mistyped command", []string{"trian", "--config", qs}, 2,
			`memunet: unknown command "trian"; did you mean train? the commands are train,`},
		{"a mistyped command after help", []string{"help", "predcit"}, 2,
			`help: unknown command "predcit"; did you mean predict? the commands are`},
		{"a mistyped --config", []string{"train", "--config", "../../configs/quikstart.yaml"}, 1,
			"config file ../../configs/quikstart.yaml does not exist; did you mean ../../configs/quickstart.yaml? pass an existing file"},
		{"a wrong data path did not name the near match", []string{"train", "--config", qs, "--set", "output.progress=none",
			"--set", "data.source=folder", "--set", "data.path=" + filepath.Join(dir, "shapse")}, 1,
			filepath.Join(dir, "shapse") + ": does not exist; did you mean " + shapes + "? set data.path to the dataset folder"},
	} {
		t.Run(tc.mistake, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			msg := stderr.String()
			if code != tc.code || !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 {
				t.Errorf("exit %d, stderr %q: want exit %d and one line holding %q", code, msg, tc.code, tc.want)
			}
		})
	}

	// "predicted 1 images" of one input; a run alone writes no comm_ms.
	runDir, _ := trainTiny(t)
	out := runOK(t, "predict", "--checkpoint", runDir, "--input", filepath.Join(shapes, "images"), "--out", filepath.Join(dir, "pred"))
	if !strings.HasPrefix(out, "predicted 1 image with ") {
		t.Errorf("predict of one image: %q, want \"predicted 1 image with ...\"", out)
	}
	if b, err := os.ReadFile(filepath.Join(runDir, "metrics.jsonl")); err != nil || bytes.Contains(b, []byte("comm_ms")) {
		t.Errorf("a single-process run's metrics.jsonl holds comm_ms (%v)", err)
	}
}
