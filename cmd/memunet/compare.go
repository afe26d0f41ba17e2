package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/train"
)

const compareUsage = "usage: memunet compare --config FILE [--variants baseline,checkpoint,fp16,bf16,accum4,all,gorgonia] [--steps N] [--out DIR] [--set k=v ...] [--device D] | memunet compare --runs RUN,RUN,... [--out DIR]"

// CompareRow is one line of compare's table, compare.csv and compare.json.
type CompareRow struct {
	// Name is the variant's name, or gorgonia.
	Name string `json:"variant"`
	config.Variant
	PeakAllocatedBytes int64            `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64            `json:"peak_reserved_bytes"`
	PeakRSSBytes       int64            `json:"peak_rss_bytes"`
	PeakByCategory     map[string]int64 `json:"peak_allocated_by_category"`
	// DeviceUsedPeakBytes and ContextOverheadBytes are the device's own view
	// (a GPU run: cuMemGetInfo, as nvidia-smi shows it): the most in use,
	// and what the context, kernels and scratch took before the pool.
	DeviceUsedPeakBytes  int64 `json:"device_used_peak_bytes,omitempty"`
	ContextOverheadBytes int64 `json:"context_overhead_bytes,omitempty"`
	// OffloadedPeakBytes is what the variant kept in host memory instead
	// (memory.offload).
	OffloadedPeakBytes int64   `json:"offloaded_peak_bytes,omitempty"`
	StepMSMedian       float64 `json:"step_ms_median"`
	SamplesPerSecond   float64 `json:"samples_per_s"`
	FinalLoss          float64 `json:"final_loss"`
	// Pool says whether the memory columns are memunet's exact pool bytes
	// (false for the plain-gorgonia row, which has only peak RSS).
	Pool  bool   `json:"pool"`
	Error string `json:"error,omitempty"`
	// Params is the model's trainable parameter count as the variant's run
	// reported it (for the charts' captions; 0 for gorgonia).
	Params int `json:"-"`
}

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
	var rows []CompareRow
	timelines := map[string]rundir.Timeline{}
	for _, name := range strings.Split(*variants, ",") {
		name = strings.TrimSpace(name)
		vdir := filepath.Join(dir, name)
		var row CompareRow
		if name == "gorgonia" {
			row = runGorgonia(exe, cmd.path, cmd.sets, cfg, *steps, vdir, stderr)
		} else {
			var tl rundir.Timeline
			row, tl = runVariant(exe, cmd.path, cmd.sets, cfg, name, *steps, vdir, stderr)
			if len(tl.Points) > 0 {
				timelines[name] = tl
			}
		}
		fmt.Fprintf(stdout, "  %-10s %s\n", name, rowStatus(row))
		rows = append(rows, row)
	}
	printCompareTable(stdout, rows)
	if err := writeCompareFiles(dir, rows); err != nil {
		return err
	}
	settings := newChartSettings(cmd.path, cfg, *steps, rows)
	if err := memoryChart(filepath.Join(dir, "memory.png"), rows, settings); err != nil {
		return fmt.Errorf("drawing memory.png: %w", err)
	}
	if err := timelineChart(filepath.Join(dir, "timeline.png"), rows, timelines, settings); err != nil {
		return fmt.Errorf("drawing timeline.png: %w", err)
	}
	fmt.Fprintf(stdout, "files: %s\n", strings.Join([]string{"compare.csv", "compare.json", "memory.png", "timeline.png"}, ", "))
	return nil
}

func rowStatus(r CompareRow) string {
	if r.Error != "" {
		return "failed: " + r.Error
	}
	return fmt.Sprintf("done: %.1f ms/step", r.StepMSMedian)
}

func setArgs(sets []string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

// runVariant trains one variant in a child process and reads its run files.
func runVariant(exe, configPath string, sets []string, cfg config.Config, name string, steps int, dir string, stderr io.Writer) (CompareRow, rundir.Timeline) {
	row := CompareRow{Name: name, Pool: true}
	vc, err := train.DeriveVariant(cfg, name)
	if err != nil {
		row.Error = err.Error()
		return row, rundir.Timeline{}
	}
	row.Variant = vc.Variant()
	all := append(append([]string{}, sets...), row.Variant.Sets()...)
	all = append(all, "train.steps="+strconv.Itoa(steps), "train.epochs=0", "train.val_every=0",
		"output.progress=none", "memory.timeline=true", "memory.fit=off")
	// compare owns dir: a rerun into the same --out replaces its variants' runs.
	args := append([]string{"train", "--config", configPath, "--out", dir, "--force"}, setArgs(all)...)
	if err := runChild(exe, args, stderr); err != nil {
		row.Error = err.Error()
		return row, rundir.Timeline{}
	}
	var sum rundir.Summary
	if err := readJSON(filepath.Join(dir, "summary.json"), &sum); err != nil {
		row.Error = err.Error()
		return row, rundir.Timeline{}
	}
	row.PeakAllocatedBytes, row.PeakReservedBytes, row.PeakRSSBytes = sum.PeakAllocatedBytes, sum.PeakReservedBytes, sum.PeakRSSBytes
	row.PeakByCategory, row.StepMSMedian, row.FinalLoss = sum.PeakAllocatedByCategory, sum.StepMSMedian, sum.FinalLoss
	row.Params = sum.Params
	row.DeviceUsedPeakBytes, row.ContextOverheadBytes = sum.DeviceUsedPeakBytes, sum.ContextOverheadBytes
	row.OffloadedPeakBytes = sum.OffloadedPeakBytes
	if sum.StepMSMedian > 0 {
		row.SamplesPerSecond = float64(sum.EffectiveBatch) / (sum.StepMSMedian / 1000)
	}
	var tl rundir.Timeline
	if err := readJSON(filepath.Join(dir, "timeline.json"), &tl); err != nil {
		row.Error = err.Error()
	}
	return row, tl
}

// runGorgonia runs the plain-gorgonia reference in a child process.
func runGorgonia(exe, configPath string, sets []string, cfg config.Config, steps int, dir string, stderr io.Writer) CompareRow {
	row := CompareRow{Name: "gorgonia", Variant: config.Variant{MicroBatch: cfg.Variant().EffectiveBatch(), Accumulate: 1,
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

// extraColumns says which optional columns a table has: the device's own
// view (a GPU run) and the bytes offloaded to host memory.
type extraColumns struct{ device, host bool }

// compareHeader is the table's header; the optional columns follow the
// pool's.
func compareHeader(x extraColumns) []string {
	h := append(append([]string{"variant"}, config.ColumnNames()...), "peak alloc", "peak reserved", "peak RSS")
	if x.device {
		h = append(h, "device used", "context")
	}
	if x.host {
		h = append(h, "host")
	}
	return append(h, "params", "grads", "optimizer", "activations", "workspace", "step ms", "samples/s", "final loss")
}

// byteColumns are the header's columns that hold bytes.
var byteColumns = map[string]bool{"peak alloc": true, "peak reserved": true, "peak RSS": true, "device used": true, "context": true, "host": true,
	"params": true, "grads": true, "optimizer": true, "activations": true, "workspace": true}

// deviceColumns reports whether any row has the device's own view.
func deviceColumns(rows []CompareRow) bool {
	for _, r := range rows {
		if r.DeviceUsedPeakBytes > 0 {
			return true
		}
	}
	return false
}

// columnsOf is the optional columns rows need.
func columnsOf(rows []CompareRow) extraColumns {
	x := extraColumns{device: deviceColumns(rows)}
	for _, r := range rows {
		x.host = x.host || r.OffloadedPeakBytes > 0
	}
	return x
}

// cells formats a row for the table; pool columns are "-" for gorgonia,
// device columns "-" where a row has none.
func (r CompareRow) cells(bytes func(int64) string, x extraColumns) []string {
	c := append([]string{r.Name}, r.Variant.Columns()...)
	if r.Error != "" {
		return append(c, "failed: "+r.Error)
	}
	pool := func(v int64) string {
		if !r.Pool {
			return "-"
		}
		return bytes(v)
	}
	c = append(c, pool(r.PeakAllocatedBytes), pool(r.PeakReservedBytes), bytes(r.PeakRSSBytes))
	if x.device {
		dev := func(v int64) string {
			if r.DeviceUsedPeakBytes == 0 {
				return "-"
			}
			return bytes(v)
		}
		c = append(c, dev(r.DeviceUsedPeakBytes), dev(r.ContextOverheadBytes))
	}
	if x.host {
		c = append(c, pool(r.OffloadedPeakBytes))
	}
	for _, cat := range memory.Categories() {
		c = append(c, pool(r.PeakByCategory[cat.String()]))
	}
	return append(c, fmt.Sprintf("%.1f", r.StepMSMedian), fmt.Sprintf("%.1f", r.SamplesPerSecond), fmt.Sprintf("%.4f", r.FinalLoss))
}

func printCompareTable(w io.Writer, rows []CompareRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	x := columnsOf(rows)
	fmt.Fprintln(tw, strings.Join(compareHeader(x), "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(memory.FormatBytes, x), "\t")+"\t")
	}
	tw.Flush()
}

func writeCompareFiles(dir string, rows []CompareRow) error {
	raw, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "compare.csv"))
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	x := columnsOf(rows)
	header := compareHeader(x)
	for i, h := range header {
		if byteColumns[h] {
			header[i] += " (bytes)"
		}
	}
	cw.Write(header)
	for _, r := range rows {
		cw.Write(r.cells(func(n int64) string { return strconv.FormatInt(n, 10) }, x))
	}
	cw.Flush()
	return errors.Join(cw.Error(), f.Close())
}
