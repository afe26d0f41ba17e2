package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/report"
)

const evalUsage = "usage: memunet eval --checkpoint PATH [--split val|test|train] [--set data.key=value ...] [--newest] [--tta] [--batch N] [--precision fp32|fp16|bf16] [--capacity SIZE] [--out FILE]"

// EvalReport is eval's JSON: the split's scores by a checkpoint.
type EvalReport struct {
	Checkpoint string `json:"checkpoint"`
	Step       int    `json:"step"`
	Split      string `json:"split"`
	Samples    int    `json:"samples"`
	// Data is the data section evaluated on, where --set changed it.
	Data []string `json:"data_overrides,omitempty"`
	TTA  bool     `json:"tta,omitempty"`
	metrics.Validation
}

// evalCommand scores a checkpoint on a split of its dataset (or of another
// one, by --set data.*): loss, pixel accuracy, mIoU, Dice and the
// per-class table, as training's validation computes them.
func evalCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ckPath := fs.String("checkpoint", "", "checkpoint directory, or a run directory: its best checkpoint by val_miou (--newest: its newest)")
	newest := fs.Bool("newest", false, "with a run directory, use its newest checkpoint instead of its best")
	split := fs.String("split", "val", "the split to score: val, test (a folder set's test/) or train")
	var sets stringList
	fs.Var(&sets, "set", "override a data key, e.g. --set data.path=/other/set (repeatable; the model's keys are the checkpoint's)")
	tta := fs.Bool("tta", false, "test-time flip averaging (two forward passes)")
	batch := fs.Int("batch", 0, "images per forward pass (default: the checkpoint's train.batch_size)")
	precision := fs.String("precision", "", "fp32, fp16 or bf16 (default: the checkpoint's train.precision)")
	capacity := fs.String("capacity", "", "memory pool capacity such as 6GiB (default: the checkpoint's memory.capacity)")
	out := fs.String("out", "", "the JSON report (default: eval/<split>-step-N[-tta][-data-HASH].json in the checkpoint's run directory)")
	if err := fs.Parse(args); err != nil {
		return flagError(fs, err, evalUsage)
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("eval: unexpected argument %q; %s", fs.Arg(0), evalUsage)}
	case *ckPath == "":
		return usageError{"eval: --checkpoint is required; " + evalUsage}
	}
	for _, s := range sets {
		if !strings.HasPrefix(s, "data.") {
			return usageError{fmt.Sprintf("eval: --set %s: only data.* keys may change (the model is the checkpoint's); %s", s, evalUsage)}
		}
	}
	resolve := checkpoint.ResolveBest
	if *newest {
		resolve = func(arg string) (string, error) { return checkpoint.ResolveResume(arg, "") }
	}
	dir, err := resolve(*ckPath)
	if err != nil {
		return err
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	if len(sets) > 0 {
		cfg, err := checkpoint.ReadConfig(dir, sets)
		if err != nil {
			return err
		}
		ck.Config = cfg
	}
	ck.Config.Invocation = checkpointInvocation(dir, sets)
	if *out == "" {
		run := checkpoint.RunDirOf(dir)
		if run == "" {
			return usageError{fmt.Sprintf("eval: %s is not in a run directory's checkpoints/; name the report with --out", dir)}
		}
		*out = filepath.Join(run, "eval", evalReportName(*split, ck.Manifest.Step, *tta, sets))
	}
	if err := checkpoint.CheckOutside(*out, dir); err != nil {
		return usageError{"eval: --out " + err.Error()}
	}
	lock, err := outdir.Acquire(filepath.Dir(*out), "memunet eval")
	if err != nil {
		return err
	}
	defer lock.Clear() // a folder made for a failed command goes; no lock file stays beside the result
	prec := ck.Config.Train.Precision
	if *precision != "" {
		if prec, err = backend.ParsePrecision(*precision); err != nil {
			return usageError{"eval: --precision " + err.Error()}
		}
	}
	if *batch == 0 {
		*batch = ck.Config.Train.BatchSize
	}
	lim, err := predictLimits("eval", ck.Config, *capacity)
	if err != nil {
		return err
	}
	p, err := predict.NewPredictor(ck, prec, lim.Capacity, *batch)
	if err != nil {
		return err
	}
	defer p.Close()
	p.Note = os.Stderr
	v, samples, err := p.Score(*split, *tta, lim)
	if err != nil {
		return fmt.Errorf("eval: --split %s: %w", *split, err)
	}
	rep := EvalReport{Checkpoint: dir, Step: ck.Manifest.Step, Split: *split, Samples: samples, Data: sets, TTA: *tta, Validation: v}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(*out, append(js, '\n')); err != nil {
		return fmt.Errorf("eval: writing %s: %w", *out, err)
	}
	fmt.Fprintf(stdout, "%s, %d samples, by %s (step %d): loss %.4f  pixel acc %.4f  miou %.4f  dice %.4f\n",
		*split, samples, dir, ck.Manifest.Step, v.ValLoss, v.ValPixelAcc, v.ValMIoU, v.ValDice)
	report.PrintClassTable(stdout, v.PerClass)
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

// evalReportName is the default report's name: the split and step, and
// what changed the scores (--tta, --set data.*: a hash of the overrides),
// so that an evaluation on other data or with TTA never replaces the
// plain one's report.
func evalReportName(split string, step int, tta bool, sets []string) string {
	name := fmt.Sprintf("%s-step-%08d", split, step)
	if tta {
		name += "-tta"
	}
	if len(sets) > 0 {
		sum := sha256.Sum256([]byte(strings.Join(sets, "\n")))
		name += "-data-" + hex.EncodeToString(sum[:4])
	}
	return name + ".json"
}
