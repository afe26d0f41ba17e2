package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/train"
)

const compareUsage = "usage: memunet compare --config FILE [--variants baseline,checkpoint,fp16,bf16,accum4,all,gorgonia] [--steps N] [--out DIR] [--set k=v ...] [--device D] | memunet compare --runs RUN,RUN,... [--out DIR]"

// compareCommand runs every variant (and plain gorgonia) for a few steps,
// each in a fresh process so that its peak RSS is its own, and writes the
// table, compare.csv, compare.json, memory.png and timeline.png.
func compareCommand(args []string, stdout, stderr io.Writer) error {
	cmd := newConfigCommand("compare", compareUsage)
	cmd.addDevice()
	fs := cmd.Flags
	variants := fs.String("variants", strings.Join(append(train.VariantNames(), "gorgonia"), ","), "comma-separated variants")
	steps := fs.Int("steps", 5, "optimizer steps per variant")
	outDir := fs.String("out", "", "output directory (default runs/compare-<timestamp>)")
	runs := fs.String("runs", "", "instead of training: existing run directories (comma-separated) whose validation curves to plot together into val-curves.png")
	cmd.noConfig = func() bool { return *runs != "" }
	cfg, err := cmd.load(args)
	if errors.Is(err, errNoConfig) {
		return compareRuns(strings.Split(*runs, ","), *outDir, stdout)
	}
	if err != nil {
		return err
	}
	if *runs != "" {
		return cmd.usageError("--runs compares existing runs: give it without --config")
	}
	if *steps < 1 {
		return cmd.usageError("--steps must be at least 1")
	}
	dir := *outDir
	if dir == "" {
		dir = filepath.Join("runs", "compare-"+time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("compare: cannot find its own executable to run the variants: %w", err)
	}
	h, w := cfg.ImageSize()
	fmt.Fprintf(stdout, "memunet compare: %s, %dx%d, effective batch %d, %d steps per variant, writing to %s\n",
		cmd.path, h, w, cfg.Train.BatchSize*cfg.Train.Accumulate, *steps, dir)
	var rows []report.CompareRow
	timelines := map[string]report.Timeline{}
	for _, name := range strings.Split(*variants, ",") {
		name = strings.TrimSpace(name)
		vdir := filepath.Join(dir, name)
		var row report.CompareRow
		if name == "gorgonia" {
			row = runGorgonia(exe, cmd.path, cmd.sets, cfg, *steps, vdir, stderr)
		} else {
			var tl report.Timeline
			row, tl = runVariant(exe, cmd.path, cmd.sets, cfg, name, *steps, vdir, stderr)
			if len(tl.Points) > 0 {
				timelines[name] = tl
			}
		}
		fmt.Fprintf(stdout, "  %-10s %s\n", name, row.Status())
		rows = append(rows, row)
	}
	report.PrintCompareTable(stdout, rows)
	if err := report.WriteCompare(dir, rows, timelines, report.NewCompareSetup(cmd.path, cfg, *steps, rows)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "files: %s\n", strings.Join(report.CompareFiles(), ", "))
	return nil
}

func setArgs(sets []string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

// runVariant trains one variant in a child process and reads its run files.
func runVariant(exe, configPath string, sets []string, cfg config.Config, name string, steps int, dir string, stderr io.Writer) (report.CompareRow, report.Timeline) {
	row := report.CompareRow{Name: name, Pool: true}
	vc, err := train.DeriveVariant(cfg, name)
	if err != nil {
		row.Error = err.Error()
		return row, report.Timeline{}
	}
	row.Variant = vc.Variant()
	all := append(append([]string{}, sets...), row.Variant.Sets()...)
	all = append(all, "train.steps="+strconv.Itoa(steps), "train.epochs=0", "train.val_every=0",
		"output.progress=none", "memory.timeline=true", "memory.fit=off")
	// compare owns dir: a rerun into the same --out replaces its variants' runs.
	args := append([]string{"train", "--config", configPath, "--out", dir, "--force"}, setArgs(all)...)
	if err := runChild(exe, args, stderr); err != nil {
		row.Error = err.Error()
		return row, report.Timeline{}
	}
	var sum rundir.Summary
	if err := readJSON(filepath.Join(dir, "summary.json"), &sum); err != nil {
		row.Error = err.Error()
		return row, report.Timeline{}
	}
	row.PeakAllocatedBytes, row.PeakReservedBytes, row.PeakRSSBytes = sum.PeakAllocatedBytes, sum.PeakReservedBytes, sum.PeakRSSBytes
	row.PeakByCategory, row.StepMSMedian, row.FinalLoss = sum.PeakAllocatedByCategory, sum.StepMSMedian, sum.FinalLoss
	row.Params = sum.Params
	row.DeviceUsedPeakBytes, row.ContextOverheadBytes = sum.DeviceUsedPeakBytes, sum.ContextOverheadBytes
	row.OffloadedPeakBytes = sum.OffloadedPeakBytes
	if sum.StepMSMedian > 0 {
		row.SamplesPerSecond = float64(sum.EffectiveBatch) / (sum.StepMSMedian / 1000)
	}
	var tl report.Timeline
	if err := readJSON(filepath.Join(dir, "timeline.json"), &tl); err != nil {
		row.Error = err.Error()
	}
	return row, tl
}

// runGorgonia runs the plain-gorgonia reference in a child process.
func runGorgonia(exe, configPath string, sets []string, cfg config.Config, steps int, dir string, stderr io.Writer) report.CompareRow {
	row := report.CompareRow{Name: "gorgonia", Variant: config.Variant{MicroBatch: cfg.Variant().EffectiveBatch(), Accumulate: 1,
		Precision: backend.Float32, EmptyCache: cfg.Memory.EmptyCache}}
	args := append([]string{"gorgonia", "--config", configPath, "--out", dir, "--steps", strconv.Itoa(steps)}, setArgs(sets)...)
	if err := runChild(exe, args, stderr); err != nil {
		row.Error = err.Error()
		return row
	}
	var sum gorgoniaSummary
	if err := readJSON(filepath.Join(dir, "summary.json"), &sum); err != nil {
		row.Error = err.Error()
		return row
	}
	row.PeakRSSBytes, row.StepMSMedian, row.FinalLoss = sum.PeakRSSBytes, sum.StepMSMedian, sum.FinalLoss
	if sum.StepMSMedian > 0 {
		row.SamplesPerSecond = float64(row.MicroBatch) / (sum.StepMSMedian / 1000)
	}
	return row
}

// runChild runs the memunet executable with args; its output is discarded
// unless it fails, when its last error line becomes the error.
func runChild(exe string, args []string, stderr io.Writer) error {
	cmd := exec.Command(exe, args...)
	var errOut strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(strings.TrimPrefix(msg, "memunet: "))
	}
	return nil
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
