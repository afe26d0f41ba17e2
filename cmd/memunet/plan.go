package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/train"
)

const planUsage = "usage: memunet plan --config FILE [--set k=v ...] [--capacity SIZE] [--variants baseline,...] [--wide] [--suggest patch] [--json] [--device D]"

// planCommand prints the predicted peak memory of each variant, computed
// from the config by a dry run, and with a capacity which variants fit.
func planCommand(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("plan", planUsage)
	cmd.addDevice()
	fs := cmd.Flags
	capacity := fs.String("capacity", "", "device size, e.g. 6GiB, or auto: a GPU's free memory, on the CPU the memory this process may use (default: memory.capacity)")
	variants := fs.String("variants", "config,"+strings.Join(train.VariantNames(), ","), "comma-separated variants")
	asJSON := fs.Bool("json", false, "print JSON")
	wide := fs.Bool("wide", false, "every column: the peak split by category and by phase (wider than 100 columns)")
	suggest := fs.String("suggest", "", "patch: print the largest square data.patch whose plan fits the capacity (with auto on the CPU: pool and buffers within "+memlimit.MarginText+")")
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
		if capBytes, capNote, err = train.AutoCapacity(cfg); err != nil {
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
	host := memlimit.Read()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Capacity    int64           `json:"capacity,omitempty"`
			Host        hostJSON        `json:"host_memory"`
			Recommended string          `json:"recommended,omitempty"`
			Variants    []train.PlanRow `json:"variants"`
		}{capBytes, hostJSON{host.Bytes, host.Source()}, rec, rows})
	}
	h, w := cfg.ImageSize()
	fmt.Fprintf(stdout, "memunet plan: %s, %dx%d images, effective batch %d\n", cmd.path, h, w, cfg.Train.BatchSize*cfg.Train.Accumulate)
	fmt.Fprintf(stdout, "host memory: this process may use %s\n", host)
	fmt.Fprintln(stdout, "predicted peak bytes, exact: a dry run of the same allocations")
	return report.PrintPlan(stdout, rows, report.PlanTable{Wide: *wide, Capacity: capBytes, CapacityNote: capNote,
		Arena: cfg.Memory.Allocator == "arena", Recommended: rec, Configured: cfg.Variant()})
}

// hostJSON is the memory this process may use, as plan --json gives it.
type hostJSON struct {
	Bytes  int64  `json:"bytes"`
	Source string `json:"source"`
}

// suggestPatch prints the largest square data.patch that fits capBytes.
func suggestPatch(cfg config.Config, capBytes int64, capNote string, asJSON bool, stdout io.Writer) error {
	var host int64
	if capNote != "" && train.PoolOnHost(cfg) { // capacity: auto, in host memory
		l := memlimit.Read()
		host = l.Budget()
		capNote += fmt.Sprintf("; the patch's pool and buffers fit %s of it (%s)", memory.FormatBytes(host), memlimit.MarginText)
	}
	s, err := train.SuggestPatch(cfg, capBytes, host)
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
	return report.PrintPatchSuggestion(stdout, s, capBytes, capNote)
}
