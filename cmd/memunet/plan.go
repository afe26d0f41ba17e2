package main

import (
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
	capBytes, capNote, err := capacityOf("plan", *capacity, cfg)
	if err != nil {
		return err
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
		return report.WritePlanJSON(stdout, rows, capBytes, host, rec)
	}
	fmt.Fprintf(stdout, "memunet plan: %s, %s, effective batch %d\n", cmd.path, cfg.SampleSize(), cfg.Train.BatchSize*cfg.Train.Accumulate)
	return report.PrintPlan(stdout, rows, report.PlanTable{Wide: *wide, Capacity: capBytes, CapacityNote: capNote, Host: host,
		Arena: cfg.Memory.Allocator == "arena", Recommended: rec, Configured: cfg.Variant(), Conv: train.LibraryPlan(cfg)})
}

// suggestPatch prints the largest square data.patch that fits capBytes:
// with capacity auto on the CPU, its pool and buffers within memlimit's
// share of the host's memory.
func suggestPatch(cfg config.Config, capBytes int64, capNote string, asJSON bool, stdout io.Writer) error {
	var host int64
	if capNote != "" && train.PoolOnHost(cfg) {
		host = memlimit.Read().Budget()
		capNote += fmt.Sprintf("; the patch's pool and buffers fit %s of it (%s)", memory.FormatBytes(host), memlimit.MarginText)
	}
	s, err := train.SuggestPatch(cfg, capBytes, host)
	if err != nil {
		return err
	}
	if asJSON {
		return report.WritePatchJSON(stdout, s, capBytes)
	}
	return report.PrintPatchSuggestion(stdout, s, capBytes, capNote)
}
