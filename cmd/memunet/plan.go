package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/train"
)

const planUsage = "usage: memunet plan --config FILE [--set k=v ...] [--capacity SIZE] [--variants baseline,...] [--wide] [--suggest patch] [--json] [--device D]"

// planCommand prints the predicted peak memory of each variant, computed
// from the config by a dry run, and with a capacity which variants fit.
func planCommand(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("plan", planUsage)
	cmd.addDevice()
	fs := cmd.Flags
	capacity := fs.String("capacity", "", "device size, e.g. 6GiB (default: memory.capacity)")
	variants := fs.String("variants", "config,"+strings.Join(train.VariantNames(), ","), "comma-separated variants")
	asJSON := fs.Bool("json", false, "print JSON")
	wide := fs.Bool("wide", false, "every column: the peak split by category and by phase (wider than 100 columns)")
	suggest := fs.String("suggest", "", "patch: print the largest square data.patch whose plan fits the capacity")
	cfg, err := cmd.load(args)
	if err != nil {
		return err
	}
	capBytes := int64(cfg.Memory.Capacity)
	if *capacity != "" {
		c, err := config.ParseByteSize(*capacity)
		if err != nil {
			return usageError{"plan: --capacity " + err.Error()}
		}
		capBytes = int64(c)
	}
	capNote := ""
	if capBytes == int64(config.CapacityAuto) {
		if capBytes, capNote, err = resolveCapacity(cfg); err != nil {
			return err
		}
	}
	if *suggest != "" {
		if *suggest != "patch" {
			return usageError{fmt.Sprintf("plan: --suggest %q: the one suggestion is patch", *suggest)}
		}
		return suggestPatch(cfg, capBytes, capNote, *asJSON, stdout)
	}
	rows, rec, err := train.Plan(cfg, strings.Split(*variants, ","), capBytes)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Capacity    int64           `json:"capacity,omitempty"`
			Recommended string          `json:"recommended,omitempty"`
			Variants    []train.PlanRow `json:"variants"`
		}{capBytes, rec, rows})
	}
	h, w := cfg.ImageSize()
	fmt.Fprintf(stdout, "memunet plan: %s, %dx%d images, effective batch %d\n", cmd.path, h, w, cfg.Train.BatchSize*cfg.Train.Accumulate)
	fmt.Fprintln(stdout, "predicted peak bytes, exact: a dry run of the same allocations")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The default table fits 100 columns; --wide adds the peak's split.
	head := append([]string{"variant"}, config.ColumnNames()...)
	if *wide {
		head = append(head, "params", "grads", "optimizer", "activations", "workspace")
	}
	head = append(head, "peak", "reserved")
	if *wide {
		head = append(head, "forward", "backward", "opt step", "validation")
	}
	head = append(head, "est. time")
	offloads := slices.ContainsFunc(rows, func(r train.PlanRow) bool { return r.OffloadedPeakBytes > 0 })
	if offloads {
		head = append(head, "host")
	}
	if capBytes > 0 {
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
			if *wide {
				cells = append(cells, fb(r.PeakByCategory[c.String()]))
			}
		}
		cells = append(cells, fb(r.PeakAllocatedBytes), fb(r.PeakReservedBytes))
		if *wide {
			for _, ph := range []string{train.PhaseForward, train.PhaseBackward, train.PhaseOptimizer, train.PhaseValidation} {
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
		fmt.Fprintf(stdout, "%s: %s\n", r.Name, strings.TrimPrefix(r.Error, "variant "+r.Name+" "))
	}
	if !*wide {
		fmt.Fprintln(stdout, "peak: allocated bytes at the most; --wide splits it by category and by phase.")
	}
	fmt.Fprintln(stdout, "est. time: step time relative to baseline (FLOPs with recompute, 16-bit and accumulation costs).")
	if cfg.Memory.Allocator == "arena" {
		fmt.Fprintln(stdout, "reserved: the arena, one block where a dry run placed every buffer; capacity is checked on it.")
	} else {
		fmt.Fprintln(stdout, "reserved: the caching pool's memory at its most (pages or segments); capacity is checked on it.")
	}
	if offloads {
		fmt.Fprintln(stdout, "host: the most the offloaded blocks' inputs hold in host memory (pinned on a GPU), not the device.")
	}
	if capNote != "" {
		fmt.Fprintln(stdout, capNote)
	}
	if capBytes > 0 {
		if rec != "" {
			fmt.Fprintf(stdout, "capacity %s: recommended %s, the fitting variant with the lowest estimated time", fb(capBytes), rec)
			if flags := recommendedFlags(cfg, rows, rec); flags != "" {
				fmt.Fprintf(stdout, ";\nto train it, add to your command: %s\n", flags)
			} else {
				fmt.Fprintln(stdout, ":\nthe configuration as it is")
			}
		} else {
			fmt.Fprintf(stdout, "capacity %s: no variant fits; lower train.batch_size, data.resize or model.base\n", fb(capBytes))
		}
	}
	return nil
}

// resolveCapacity is memory.capacity: auto for cfg's device, in bytes, with
// the note saying what it is (train.ResolveCapacity).
func resolveCapacity(cfg config.Config) (int64, string, error) {
	b, err := train.Target(cfg)
	if err != nil {
		return 0, "", err
	}
	cfg.Memory.Capacity = config.CapacityAuto
	cfg, note := train.ResolveCapacity(cfg, b)
	return int64(cfg.Memory.Capacity), note, nil
}

// recommendedFlags is the --set flags that turn cfg into the plan row named
// rec ("" when they are the same), quoted for a shell where needed.
func recommendedFlags(cfg config.Config, rows []train.PlanRow, rec string) string {
	i := slices.IndexFunc(rows, func(r train.PlanRow) bool { return r.Name == rec })
	if i < 0 {
		return ""
	}
	var flags []string
	for _, set := range rows[i].Variant.SetsFrom(cfg.Variant()) {
		flags = append(flags, "--set "+shellQuote(set))
	}
	return strings.Join(flags, " ")
}

// shellQuote is s as one shell word: as it is when it holds nothing a
// shell would expand or split ([0,2] is a glob), else in single quotes.
func shellQuote(s string) string {
	if !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// suggestPatch prints the largest square data.patch that fits capBytes.
func suggestPatch(cfg config.Config, capBytes int64, capNote string, asJSON bool, stdout io.Writer) error {
	s, err := train.SuggestPatch(cfg, capBytes)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Capacity  int64         `json:"capacity"`
			Patch     []int         `json:"patch"`
			Plan      train.PlanRow `json:"plan"`
			Next      []int         `json:"next,omitempty"`
			NextBytes int64         `json:"next_peak_reserved_bytes,omitempty"`
		}{capBytes, []int{s.Size, s.Size}, s.Row, map[bool][]int{true: {s.Next, s.Next}}[s.Next > 0], s.NextBytes})
	}
	if capNote != "" {
		fmt.Fprintln(stdout, capNote)
	}
	fb := memory.FormatBytes
	fmt.Fprintf(stdout, "data.patch: [%d, %d] is the largest square patch that fits %s: planned peak %s reserved (%s allocated), %s x %d micro-batches, %s, checkpoint %s\n",
		s.Size, s.Size, fb(capBytes), fb(s.Row.PeakReservedBytes), fb(s.Row.PeakAllocatedBytes),
		fmt.Sprint(s.Row.MicroBatch), s.Row.Accumulate, s.Row.Precision, s.Row.Config.Model.Checkpoint.String())
	switch {
	case s.Next > 0:
		fmt.Fprintf(stdout, "the next size, [%d, %d], needs %s\n", s.Next, s.Next, fb(s.NextBytes))
	default:
		fmt.Fprintf(stdout, "it is the images' smaller side (%d): a larger patch would only be padding\n", s.Limit)
	}
	return nil
}
