// Package runfiles names the files and folders memunet writes: a run
// directory's (train --out), a checkpoint's inside it, and the outputs of
// predict, eval and compare. Each name is declared here once, and every
// package that writes or reads one takes it from here, so a rename is one
// line and a reader finds every file a run holds in one place
// (TestNamesDeclaredOnce holds the module's other non-test files to it).
//
// The output folder's own bookkeeping (the lock, a cut-off write's
// journal, temporary names) is package outdir's, for any folder.
package runfiles

import (
	"fmt"
	"strconv"
	"strings"
)

// A run directory.
const (
	// Config is the configuration the run trains, resolved (every key).
	Config = "config.yaml"
	// Metrics is one JSON record per logged step and per validation.
	Metrics = "metrics.jsonl"
	// Summary is the run's end: steps, times, scores, memory.
	Summary = "summary.json"
	// Split is the samples that train and those that validate, by name
	// (data.SampleName, else the sample's index): what eval checks its
	// split against.
	Split = "split.json"
	// Curves is the training curves, drawn at every validation.
	Curves = "curves.png"
	// Timeline is every allocation and free (memory.timeline).
	Timeline = "timeline.json"
	// Checkpoints is the folder of the run's checkpoints (CheckpointName).
	Checkpoints = "checkpoints"
	// TensorBoard is the folder of TensorBoard's event files.
	TensorBoard = "tb"
	// Best is the link to the checkpoint with the best train.monitor.
	Best = "best"
	// Eval is the folder of eval's reports.
	Eval = "eval"
	// FolderEval is eval --predictions's report, in the predictions'
	// folder by default.
	FolderEval = "eval.json"
	// Predict is the folder of predict's outputs by default.
	Predict = "predict"
)

// A checkpoint directory (Checkpoints/CheckpointName).
const (
	// Manifest is everything but the tensors a resumed run needs.
	Manifest = "manifest.json"
	// ManifestSum is Manifest's SHA-256 as sha256sum writes it.
	ManifestSum = Manifest + ".sha256"
	// Model holds the model's state_dict: every parameter (the fp32
	// masters) and buffer under its PyTorch name, BatchNorm's
	// num_batches_tracked as I64 scalars.
	Model = "model.safetensors"
	// Optimizer holds the optimizer's state for every trainable parameter,
	// state.<param>.<name> (exp_avg and exp_avg_sq for Adam,
	// momentum_buffer, square_avg: optim.StateTensor).
	Optimizer = "optimizer.safetensors"
)

// CheckpointName is the folder of a checkpoint at step: step-NNNNNNNN
// (eight digits at least), and -seq after it where seq > 1 tells apart
// checkpoints of one step (a run resumed from an older one).
func CheckpointName(step, seq int) string {
	if seq <= 1 {
		return fmt.Sprintf("step-%08d", step)
	}
	return fmt.Sprintf("step-%08d-%d", step, seq)
}

// ParseCheckpointName is CheckpointName's step and seq (1 without a
// suffix); ok is false for any other name.
func ParseCheckpointName(name string) (step, seq int, ok bool) {
	rest, found := strings.CutPrefix(name, "step-")
	if !found {
		return 0, 0, false
	}
	digits, suffix, hasSeq := strings.Cut(rest, "-")
	if len(digits) < 8 || !allDigits(digits) || hasSeq && (suffix == "" || !allDigits(suffix)) {
		return 0, 0, false
	}
	step, err := strconv.Atoi(digits)
	if err != nil {
		return 0, 0, false
	}
	seq = 1
	if hasSeq {
		if seq, err = strconv.Atoi(suffix); err != nil {
			return 0, 0, false
		}
	}
	return step, seq, true
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// AtStep is name-step-NNNNNNNN: what a command made of a run's checkpoint
// at step (predict's folder, eval's report, an export).
func AtStep(name string, step int) string { return fmt.Sprintf("%s-step-%08d", name, step) }

// An export in a run directory by default (ExportName); ExportGlob
// matches every one.
const (
	ExportStem = "model"
	ExportGlob = ExportStem + "-step-*"
)

// ExportName is an export's default file of the checkpoint at step:
// model-step-NNNNNNNN, -precision where it is not fp32, .format
// (safetensors or onnx).
func ExportName(step int, precision, format string) string {
	name := AtStep(ExportStem, step)
	if precision != "fp32" {
		name += "-" + precision
	}
	return name + "." + format
}

// memunet cv's folder: a run directory per fold (FoldDir) and the
// folds' scores.
const CrossValidation = "cv.json"

// FoldDir is the run directory of fold k in memunet cv's folder: fold_K.
func FoldDir(k int) string { return "fold_" + strconv.Itoa(k) }

// predict's output folder.
const (
	// PredictReport is predict's report, written last.
	PredictReport = "predict.json"
	// Legend is the color of each class in the masks.
	Legend = "legend.png"
)

// compare's output folder (and each variant's run directory in it).
const (
	CompareCSV    = "compare.csv"
	CompareJSON   = "compare.json"
	MemoryChart   = "memory.png"
	TimelineChart = "timeline.png"
	// ValCurves is compare --runs' validation curves of every run.
	ValCurves = "val-curves.png"
)

// CompareFiles are the files a compare writes beside its variants' runs.
func CompareFiles() []string { return []string{CompareCSV, CompareJSON, MemoryChart, TimelineChart} }
