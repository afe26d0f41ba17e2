package report

// compare's results: a row per variant, and its table, compare.csv and
// compare.json (the charts are memory.go's and timeline.go's).

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// CompareRow is one line of compare's table, compare.csv and compare.json.
type CompareRow struct {
	// Name is the variant's name, or gorgonia.
	Name string `json:"variant"`
	config.Variant
	PeakAllocatedBytes int64            `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64            `json:"peak_reserved_bytes"`
	PeakRSSBytes       int64            `json:"peak_rss_bytes"`
	PeakByCategory     map[string]int64 `json:"peak_allocated_by_category"`
	// Conv is who computed the convolutions on a GPU (cudnn or memunet)
	// and CUDNN the cuDNN library, as the run's summary.json says; both
	// absent on the CPU.
	Conv  string `json:"conv,omitempty"`
	CUDNN string `json:"cudnn,omitempty"`
	// ConvWorkspaceBytes is the most workspace cuDNN's chosen algorithms
	// took for one convolution pass (from the pool; cuda.workspace bounds
	// it).
	ConvWorkspaceBytes int64 `json:"conv_workspace_bytes,omitempty"`
	// DeviceUsedPeakBytes and ContextOverheadBytes are the device's own view
	// (a GPU run: cuMemGetInfo, as nvidia-smi shows it): the most in use,
	// and what the context, kernels and scratch took before the pool.
	DeviceUsedPeakBytes  int64 `json:"device_used_peak_bytes,omitempty"`
	ContextOverheadBytes int64 `json:"context_overhead_bytes,omitempty"`
	// DeviceBeyondPoolBytes is the device's used peak less the context's
	// overhead and the pool's reserved peak: what the device held that
	// the pool does not account for (0 where the two views agree).
	DeviceBeyondPoolBytes int64 `json:"device_beyond_pool_bytes,omitempty"`
	// PagesMapped and PagesUnmapped are the pages the caching pool moved
	// (memory.allocator: caching on memory that pages).
	PagesMapped   int64 `json:"pages_mapped,omitempty"`
	PagesUnmapped int64 `json:"pages_unmapped,omitempty"`
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

// Status is the row in a few words: "done: 13.2 ms/step" or "failed: why".
func (r CompareRow) Status() string {
	if r.Error != "" {
		return "failed: " + r.Error
	}
	return fmt.Sprintf("done: %.1f ms/step", r.StepMSMedian)
}

// WriteCompare writes compare's files into dir: compare.csv,
// compare.json, memory.png and timeline.png (timelines by row name).
func WriteCompare(dir string, rows []CompareRow, timelines map[string]Timeline, setup CompareSetup) error {
	raw, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(filepath.Join(dir, runfiles.CompareJSON), append(raw, '\n')); err != nil {
		return err
	}
	if err := outdir.WriteFile(filepath.Join(dir, runfiles.CompareCSV), func(w io.Writer) error { return writeCompareCSV(w, rows) }); err != nil {
		return err
	}
	if err := MemoryChart(filepath.Join(dir, runfiles.MemoryChart), rows, setup); err != nil {
		return fmt.Errorf("drawing memory.png: %w", err)
	}
	if err := TimelineChart(filepath.Join(dir, runfiles.TimelineChart), rows, timelines, setup); err != nil {
		return fmt.Errorf("drawing timeline.png: %w", err)
	}
	return nil
}

// extraColumns says which optional columns a table has: the device's own
// view (a GPU run), the bytes offloaded to host memory, and who computed
// the convolutions with the workspace it chose (a GPU run).
type extraColumns struct{ device, host, conv bool }

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
	if x.conv {
		h = append(h, "conv", "conv ws")
	}
	return append(h, "params", "grads", "optimizer", "activations", "workspace", "step ms", "samples/s", "final loss")
}

// byteColumns are the header's columns that hold bytes.
var byteColumns = map[string]bool{"peak alloc": true, "peak reserved": true, "peak RSS": true, "device used": true, "context": true, "host": true, "conv ws": true,
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
		x.conv = x.conv || r.Conv != ""
	}
	return x
}

// cells formats a row for the table; pool columns are "-" for gorgonia,
// device columns "-" where a row has none.
func (r CompareRow) cells(bytes func(int64) string, x extraColumns) []string {
	c := append([]string{r.Name}, r.Variant.Columns()...)
	if r.Error != "" { // every cell, so that the rows below stay aligned; why follows the table
		c = append(c, "failed")
		for len(c) < len(compareHeader(x)) {
			c = append(c, "-")
		}
		return c
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
	if x.conv {
		conv := r.Conv
		if conv == "" {
			conv = "-"
		}
		c = append(c, conv, pool(r.ConvWorkspaceBytes))
	}
	for _, cat := range memory.Categories() {
		c = append(c, pool(r.PeakByCategory[cat.String()]))
	}
	return append(c, fmt.Sprintf("%.1f", r.StepMSMedian), fmt.Sprintf("%.1f", r.SamplesPerSecond), fmt.Sprintf("%.4f", r.FinalLoss))
}

// PrintCompareTable writes compare's table: a row per variant, bytes in
// KiB/MiB/GiB.
func PrintCompareTable(w io.Writer, rows []CompareRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	x := columnsOf(rows)
	fmt.Fprintln(tw, strings.Join(compareHeader(x), "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(memory.FormatBytes, x), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			if _, err := fmt.Fprintf(w, "%s failed: %s\n", r.Name, r.Error); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeCompareCSV is compare.csv: the table's columns, bytes as integers.
func writeCompareCSV(w io.Writer, rows []CompareRow) error {
	cw := csv.NewWriter(w)
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
	return cw.Error()
}

// CompareSetup is what compare ran with; its charts state it under their
// titles.
type CompareSetup struct {
	Config      string // the config file's name
	Base, Depth int    // model.base, model.depth
	Params      int    // trainable parameters; 0 when no variant reported them
	H, W        int    // image size
	// MicroBatch and Accumulate are the configuration's; each variant's own
	// split is written under its bars and in the timeline's panels.
	MicroBatch, Accumulate int
	Steps                  int // optimizer steps per variant
}

// NewCompareSetup gathers the setup from compare's configuration, its
// --steps and the rows (the parameter count comes from the variants' runs).
func NewCompareSetup(configPath string, cfg config.Config, steps int, rows []CompareRow) CompareSetup {
	h, w := cfg.ImageSize()
	v := cfg.Variant()
	s := CompareSetup{Config: filepath.Base(configPath), Base: cfg.Model.Base, Depth: cfg.Model.Depth,
		H: h, W: w, MicroBatch: v.MicroBatch, Accumulate: v.Accumulate, Steps: steps}
	for _, r := range rows {
		if r.Params > 0 {
			s.Params = r.Params
			break
		}
	}
	return s
}

// parts are the setup as short phrases for a caption.
func (s CompareSetup) parts() []string {
	model := fmt.Sprintf("UNet base %d, depth %d", s.Base, s.Depth)
	if s.Params > 0 {
		model += ", " + groupDigits(s.Params) + " params"
	}
	out := []string{
		model,
		fmt.Sprintf("%d×%d images", s.H, s.W),
		fmt.Sprintf("micro-batch %d × accumulation %d = effective batch %d", s.MicroBatch, s.Accumulate, s.MicroBatch*s.Accumulate),
		fmt.Sprintf("%d steps per variant", s.Steps),
	}
	if s.Config != "" && s.Config != "." {
		out = append(out, s.Config)
	}
	return out
}

func (s CompareSetup) String() string { return strings.Join(s.parts(), " · ") }

// variantBrief is a variant's settings in a few characters: "2×4 fp16",
// with ", ckpt all" when it checkpoints.
func variantBrief(v config.Variant) string {
	s := fmt.Sprintf("%d×%d %s", v.MicroBatch, v.Accumulate, v.Precision)
	if c := v.Checkpoint.String(); c != "" && c != "none" {
		s += ", ckpt " + c
	}
	return s
}

// failedNotes say which rows failed (and so are missing from a chart).
func failedNotes(rows []CompareRow) []string {
	var out []string
	for _, r := range rows {
		if r.Error != "" {
			msg := r.Error
			if len(msg) > 60 {
				msg = msg[:57] + "..."
			}
			out = append(out, r.Name+" failed: "+msg)
		}
	}
	return out
}
