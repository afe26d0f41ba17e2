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

const planUsage = "usage: memunet plan --config FILE [--set k=v ...] [--capacity SIZE] [--variants baseline,...] [--json] [--device D]"

// planCommand prints the predicted peak memory of each variant, computed
// from the config by a dry run, and with a capacity which variants fit.
func planCommand(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("plan", planUsage)
	cmd.addDevice()
	fs := cmd.Flags
	capacity := fs.String("capacity", "", "device size, e.g. 6GiB (default: memory.capacity)")
	variants := fs.String("variants", "config,"+strings.Join(train.VariantNames(), ","), "comma-separated variants")
	asJSON := fs.Bool("json", false, "print JSON")
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
	fmt.Fprintf(stdout, "memunet plan: %s, %dx%d images, effective batch %d; predicted peak allocated bytes (exact: a dry run of the same allocations)\n",
		cmd.path, h, w, cfg.Train.BatchSize*cfg.Train.Accumulate)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := append(append([]string{"variant"}, config.ColumnNames()...), "params", "grads", "optimizer", "activations", "workspace",
		"peak", "reserved", "forward", "backward", "opt step", "validation", "est. time")
	offloads := slices.ContainsFunc(rows, func(r train.PlanRow) bool { return r.OffloadedPeakBytes > 0 })
	if offloads {
		head = append(head, "host")
	}
	if capBytes > 0 {
		head = append(head, "fits")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	fb := memory.FormatBytes
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t\n", r.Name, r.Error)
			continue
		}
		cells := append([]string{r.Name}, r.Variant.Columns()...)
		for _, c := range memory.Categories() {
			cells = append(cells, fb(r.PeakByCategory[c.String()]))
		}
		cells = append(cells, fb(r.PeakAllocatedBytes), fb(r.PeakReservedBytes))
		for _, ph := range []string{train.PhaseForward, train.PhaseBackward, train.PhaseOptimizer, train.PhaseValidation} {
			cells = append(cells, fb(r.PeakByPhase[ph]))
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
	fmt.Fprintln(stdout, "est. time: estimated step time relative to baseline (FLOPs incl. recompute, 16-bit and accumulation overheads).")
	if cfg.Memory.Allocator == "arena" {
		fmt.Fprintln(stdout, "reserved: the arena (memory.allocator: arena), one block in which a dry run placed every buffer; capacity is checked against it.")
	} else {
		fmt.Fprintln(stdout, "reserved: the caching pool's memory at its most (its mapped pages or segments; memory.allocator: caching); capacity is checked against it. memory.allocator: arena plans one block instead.")
	}
	if offloads {
		fmt.Fprintln(stdout, "host: the most the offloaded blocks' inputs hold in host memory (memory.offload; pinned on a GPU), bytes the device does not.")
	}
	if capNote != "" {
		fmt.Fprintln(stdout, capNote)
	}
	if capBytes > 0 {
		if rec != "" {
			fmt.Fprintf(stdout, "capacity %s: recommended %s (the fitting variant with the lowest estimated time)\n", fb(capBytes), rec)
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
