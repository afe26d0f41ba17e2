package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
)

const evalUsage = "usage: memunet eval --checkpoint PATH [--split val|test|train] [--set data.key=value ...] [--newest] [--tta] [--batch N] [--precision fp32|fp16|bf16] [--capacity SIZE] [--out FILE] | --predictions DIR --references DIR [--out FILE]"

// evalCommand scores a checkpoint on a split of its dataset (or of another
// one, by --set data.*): loss, pixel accuracy, mIoU, Dice and the
// per-class table, as training's validation computes them.
func evalCommand(args []string, stdout io.Writer, sig *rundir.Interrupt) error {
	sig.AtOnce("eval", "nothing was written")
	fs := newFlags("eval")
	model := addModelFlags(fs)
	split := fs.String("split", "val", "the split to score: val, test (a folder set's test/) or train")
	var sets stringList
	fs.Var(&sets, "set", "override a data key, e.g. --set data.path=/other/set (repeatable; the model's keys are the checkpoint's)")
	tta := fs.Bool("tta", false, "test-time flip averaging (two forward passes)")
	out := fs.String("out", "", "the JSON report (default: eval/<split>-step-N[-tta][-data-HASH].json in the checkpoint's run directory)")
	preds, refs := fs.String("predictions", "", "a folder of predicted masks to score against --references (NIfTI or mask images, matched by name)"), fs.String("references", "", "the folder of reference masks for --predictions")
	if err := parseFlags(fs, args, evalUsage); err != nil {
		return err
	}
	if *preds != "" || *refs != "" {
		var given []string
		fs.Visit(func(f *flag.Flag) { given = append(given, f.Name) })
		return predict.EvalFolders(*preds, *refs, *out, given, stdout)
	}
	if *model.checkpoint == "" {
		return usageError{"eval: --checkpoint is required; " + evalUsage}
	}
	for _, s := range sets {
		if !strings.HasPrefix(s, "data.") {
			return usageError{fmt.Sprintf("eval: --set %s: only data.* keys may change (the model is the checkpoint's); %s", s, evalUsage)}
		}
	}
	ck, err := checkpoint.OpenModel(*model.checkpoint, *model.newest)
	if err != nil {
		return err
	}
	dir := ck.Dir
	if len(sets) > 0 {
		cfg, err := checkpoint.ReadConfig(dir, sets)
		if err != nil {
			return err
		}
		ck.Config = cfg
	}
	ck.Config.Invocation = checkpoint.InvocationOf(dir, sets)
	if *out == "" {
		run := checkpoint.RunDirOf(dir)
		if run == "" {
			return usageError{fmt.Sprintf("eval: %s is not in a run directory's checkpoints/; name the report with --out", dir)}
		}
		*out = filepath.Join(run, runfiles.Eval, predict.EvalReportName(*split, ck.Manifest.Step, *tta, sets))
	}
	if err := checkpoint.CheckOutside(*out, dir); err != nil {
		return usageError{"eval: --out " + err.Error()}
	}
	// Before the folder is made: the deferred Clear removes it.
	stop := sig.Cooperate("stopping at once; no report was written")
	lock, err := outdir.Acquire(filepath.Dir(*out), "memunet eval")
	if err != nil {
		return err
	}
	defer lock.Clear() // a folder made for a failed command goes; no lock file stays beside the result
	p, lim, _, err := model.predictor("eval", ck)
	if err != nil {
		return err
	}
	defer p.Close()
	p.Stop = stop
	rep, err := p.Evaluate(*split, *tta, lim, sets)
	if st := sig.Stopped(err, "eval", "no report was written"); st != 0 {
		return exitStatus(st)
	}
	if err != nil {
		return fmt.Errorf("eval: --split %s: %w", *split, err)
	}
	if err := rep.WriteFile(*out); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	v := rep.Validation
	fmt.Fprintf(stdout, "%s, %d samples, by %s (step %d): loss %.4f  pixel acc %.4f  miou %.4f  dice %.4f\n",
		*split, rep.Samples, dir, ck.Manifest.Step, v.ValLoss, v.ValPixelAcc, v.ValMIoU, v.ValDice)
	report.PrintClassTable(stdout, v.PerClass)
	fmt.Fprintf(stdout, "wrote %s and its cases' Dice, IoU and HD95: %s\n", *out, predict.CasesCSV(*out))
	return nil
}
