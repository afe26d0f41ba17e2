package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/train"
)

// PlanTable is what memunet plan's table says besides its rows.
type PlanTable struct {
	// Wide adds every column: the peak by category and by phase (wider
	// than 100 columns).
	Wide bool
	// Capacity is the bytes a variant must fit (0: none, no "fits"
	// column); CapacityNote says how an automatic one was found.
	Capacity     int64
	CapacityNote string
	// Host is the memory this process may use (memlimit.Read): a line
	// above the table.
	Host memlimit.Limit
	// Arena: memory.allocator is arena, so reserved is the arena's block.
	Arena bool
	// Recommended is the fitting row with the lowest estimated time ("":
	// none fits), said as the --set flags that turn Configured into it.
	Recommended string
	Configured  config.Variant
	// Conv is what a convolution library chose for the plans'
	// convolutions (a GPU with cuDNN), nil where none computes them.
	Conv *train.ConvLibraryPlan
}

// printConvPlan writes the library's lines: the most workspace its
// algorithms take against the budget, the convolutions memunet's kernels
// compute instead and why, and with wide every convolution's algorithms.
func printConvPlan(w io.Writer, c *train.ConvLibraryPlan, wide bool) {
	fb := memory.FormatBytes
	var most int64
	computed := 0
	for _, ch := range c.Choices {
		if ch.Fallback == "" {
			computed++
			most = max(most, ch.WorkspaceBytes)
		}
	}
	fmt.Fprintf(w, "convolutions: %s computes %d of %d shapes; its algorithms take at most %s of workspace for one pass, "+
		"from the pool and in the peak (cuda.workspace %s)\n", c.Library, computed, len(c.Choices), fb(most), fb(c.BudgetBytes))
	for _, ch := range c.Choices {
		switch {
		case ch.Fallback != "":
			fmt.Fprintf(w, "  %s (%s): memunet's kernels: %s\n", ch.Shape, ch.Precision, ch.Fallback)
		case wide:
			algos := make([]string, len(ch.Algorithms))
			for i, a := range ch.Algorithms {
				algos[i] = fmt.Sprintf("%s %s %s", a.Pass, a.Name, fb(a.WorkspaceBytes))
			}
			fmt.Fprintf(w, "  %s (%s): %s\n", ch.Shape, ch.Precision, strings.Join(algos, ", "))
		}
	}
	if !wide && computed > 0 {
		fmt.Fprintln(w, "  --wide lists each convolution's algorithms and their workspace.")
	}
}

// PrintPlan writes plan's table of rows (a row that could not be planned
// as a line below it), what its columns mean, and with a capacity the
// recommendation.
func PrintPlan(w io.Writer, rows []train.PlanRow, t PlanTable) error {
	fmt.Fprintf(w, "host memory: this process may use %s\n", t.Host.Short())
	if b := t.Host.Bounds; len(b) > 0 && strings.HasPrefix(b[0].Kind, "cgroup") {
		fmt.Fprintf(w, "  the cgroup: %s\n", b[0].Where)
	}
	fmt.Fprintln(w, "predicted peak bytes, exact: a dry run of the same allocations")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The default table fits 100 columns; Wide adds the peak's split.
	phases := []string{train.PhaseForward, train.PhaseBackward, train.PhaseOptimizer, train.PhaseValidation}
	head := append([]string{"variant"}, config.ColumnNames()...)
	if t.Wide {
		head = append(head, "params", "grads", "optimizer", "activations", "workspace")
	}
	head = append(head, "peak", "reserved")
	if t.Wide {
		head = append(head, "forward", "backward", "opt step", "validation")
	}
	head = append(head, "est. time")
	offloads := slices.ContainsFunc(rows, func(r train.PlanRow) bool { return r.OffloadedPeakBytes > 0 })
	if offloads {
		head = append(head, "host")
	}
	if t.Capacity > 0 {
		head = append(head, "fits")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	fb := memory.FormatBytes
	var failed []train.PlanRow
	for _, r := range rows {
		if r.Error != "" {
			failed = append(failed, r) // below the table: a sentence would widen a column
			continue
		}
		cells := append([]string{r.Name}, r.Variant.Columns()...)
		for _, c := range memory.Categories() {
			if t.Wide {
				cells = append(cells, fb(r.PeakByCategory[c.String()]))
			}
		}
		cells = append(cells, fb(r.PeakAllocatedBytes), fb(r.PeakReservedBytes))
		if t.Wide {
			for _, ph := range phases {
				cells = append(cells, fb(r.PeakByPhase[ph]))
			}
		}
		cells = append(cells, fmt.Sprintf("%.2fx", r.RelativeTime))
		if offloads {
			cells = append(cells, fb(r.OffloadedPeakBytes))
		}
		if r.Fits != nil {
			cells = append(cells, map[bool]string{true: "yes", false: "no"}[*r.Fits])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range failed {
		fmt.Fprintf(w, "%s: %s\n", r.Name, strings.TrimPrefix(r.Error, "variant "+r.Name+" "))
	}
	if !t.Wide {
		fmt.Fprintln(w, "peak: allocated bytes at the most; --wide splits it by category and by phase.")
	}
	fmt.Fprintln(w, "est. time: step time relative to baseline (FLOPs with recompute, 16-bit and accumulation costs).")
	if t.Arena {
		fmt.Fprintln(w, "reserved: the arena, one block where a dry run placed every buffer; capacity is checked on it.")
	} else {
		fmt.Fprintln(w, "reserved: the caching pool's memory at its most (pages or segments); capacity is checked on it.")
	}
	if offloads {
		fmt.Fprintln(w, "host: the most the offloaded blocks' inputs hold in host memory (pinned on a GPU), not the device.")
	}
	if t.Conv != nil {
		printConvPlan(w, t.Conv, t.Wide)
	}
	if t.CapacityNote != "" {
		fmt.Fprintln(w, t.CapacityNote)
	}
	if t.Capacity > 0 {
		printRecommendation(w, rows, t)
	}
	return nil
}

// printRecommendation says which variant fits t.Capacity fastest and the
// --set flags (each one shell word) that train it, or that none fits.
func printRecommendation(w io.Writer, rows []train.PlanRow, t PlanTable) {
	fb := memory.FormatBytes
	if t.Recommended == "" {
		key := "data.resize"
		if i := slices.IndexFunc(rows, func(r train.PlanRow) bool { return r.Error == "" }); i >= 0 {
			key = train.SizeKey(rows[i].Config)
		}
		fmt.Fprintf(w, "capacity %s: no variant fits; lower train.batch_size, %s or model.base\n", fb(t.Capacity), key)
		return
	}
	fmt.Fprintf(w, "capacity %s: recommended %s, the fitting variant with the lowest estimated time", fb(t.Capacity), t.Recommended)
	var flags []string
	if i := slices.IndexFunc(rows, func(r train.PlanRow) bool { return r.Name == t.Recommended }); i >= 0 {
		for _, set := range rows[i].Variant.SetsFrom(t.Configured) {
			flags = append(flags, "--set "+config.Quote(set))
		}
	}
	if len(flags) == 0 {
		fmt.Fprintln(w, ":\nthe configuration as it is")
		return
	}
	fmt.Fprintf(w, ";\nto train it, add to your command: %s\n", strings.Join(flags, " "))
}

// WritePlanJSON writes plan --json: the capacity (0: none), the memory
// this process may use and what sets it, the recommended variant and the
// rows.
func WritePlanJSON(w io.Writer, rows []train.PlanRow, capacity int64, host memlimit.Limit, recommended string) error {
	type hostMemory struct {
		Bytes  int64  `json:"bytes"`
		Source string `json:"source"`
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Capacity    int64           `json:"capacity,omitempty"`
		Host        hostMemory      `json:"host_memory"`
		Recommended string          `json:"recommended,omitempty"`
		Variants    []train.PlanRow `json:"variants"`
	}{capacity, hostMemory{host.Bytes, host.Source()}, recommended, rows})
}

// WritePatchJSON writes plan --suggest patch --json: the capacity, the
// patch and its plan, and the next size up with its need (none where the
// patch is the images' side).
func WritePatchJSON(w io.Writer, s train.PatchSuggestion, capacity int64) error {
	var next []int
	if s.Next > 0 {
		next = []int{s.Next, s.Next}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Capacity  int64         `json:"capacity"`
		Patch     []int         `json:"patch"`
		Plan      train.PlanRow `json:"plan"`
		Next      []int         `json:"next,omitempty"`
		NextBytes int64         `json:"next_peak_reserved_bytes,omitempty"`
	}{capacity, []int{s.Size, s.Size}, s.Row, next, s.NextBytes})
}

// PrintPatchSuggestion says which square data.patch (s, plan --suggest
// patch) fits capacity, with its plan, and what the next size up would
// need; note says how an automatic capacity was found.
func PrintPatchSuggestion(w io.Writer, s train.PatchSuggestion, capacity int64, note string) error {
	if note != "" {
		fmt.Fprintln(w, note)
	}
	fb := memory.FormatBytes
	patch, shape := fmt.Sprintf("[%d, %d]", s.Size, s.Size), "square"
	if s.Row.Config.Model.Volumes() {
		patch, shape = fmt.Sprintf("[%d, %d, %d]", s.Size, s.Size, s.Size), "cubic"
	}
	fmt.Fprintf(w, "data.patch: %s is the largest %s patch that fits %s: planned peak %s reserved (%s allocated), %s x %d micro-batches, %s, checkpoint %s\n",
		patch, shape, fb(capacity), fb(s.Row.PeakReservedBytes), fb(s.Row.PeakAllocatedBytes),
		fmt.Sprint(s.Row.MicroBatch), s.Row.Accumulate, s.Row.Precision, s.Row.Config.Model.Checkpoint.String())
	if s.Next > 0 {
		next := fmt.Sprintf("[%d, %d]", s.Next, s.Next)
		if s.Row.Config.Model.Volumes() {
			next = fmt.Sprintf("[%d, %d, %d]", s.Next, s.Next, s.Next)
		}
		_, err := fmt.Fprintf(w, "the next size, %s, needs %s\n", next, fb(s.NextBytes))
		return err
	}
	_, err := fmt.Fprintf(w, "it is the images' smaller side (%d): a larger patch would only be padding\n", s.Limit)
	return err
}
