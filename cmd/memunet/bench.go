package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/memunet/memunet/bench"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/train"
)

const benchUsage = "usage: memunet bench --config FILE [--steps N] [--variants config,baseline,...] [--repeat N] [--json] [--cpuprofile FILE] [--set k=v ...] [--device D]"

// benchCommand times training steps of each variant (package bench): in
// this process, or with --repeat in fresh processes, one after another.
func benchCommand(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("bench", benchUsage)
	cmd.addDevice()
	fs := cmd.Flags
	steps := fs.Int("steps", 5, "timed optimizer steps per variant (after one warm-up step)")
	variants := fs.String("variants", "config", "comma-separated variants (config, "+strings.Join(train.VariantNames(), ", ")+")")
	repeat := fs.Int("repeat", 0, "run the bench in `N` fresh processes, one after another, and report each one's steps and peak: a machine whose speed is set per process shows it")
	asJSON := fs.Bool("json", false, "print the result as JSON (package bench's Result)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the variants' runs (set-up and warm-up included) to `FILE`, for go tool pprof")
	cfg, err := cmd.load(args)
	if err != nil {
		return err
	}
	switch {
	case *steps < 1:
		return cmd.usageError("--steps must be at least 1")
	case *repeat < 0 || *repeat > 0 && (*cpuProfile != "" || *asJSON):
		return cmd.usageError("--repeat takes N >= 1, without --cpuprofile or --json (each process profiles or prints its own)")
	case *repeat > 0:
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: --repeat: %w", err)
		}
		fmt.Fprintf(stdout, "memunet bench: %s, %d processes, one after another\n", cmd.path, *repeat)
		results, err := bench.Repeat(context.Background(), exe, bench.ChildArgs(args), *repeat, nil)
		if err != nil {
			return err
		}
		return report.PrintBenchRepeats(stdout, results)
	}
	var profile *outdir.Pending // whole or not at all, replacing a link at its name
	if *cpuProfile != "" {
		if err := checkpoint.CheckNotInRun(*cpuProfile); err != nil {
			return cmd.usageError("--cpuprofile " + err.Error())
		}
		if profile, err = outdir.Create(*cpuProfile); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer profile.Close()
		if err := pprof.StartCPUProfile(profile); err != nil {
			return fmt.Errorf("bench: --cpuprofile %s: %w", *cpuProfile, err)
		}
		defer pprof.StopCPUProfile()
	}
	b, err := train.Target(cfg)
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "memunet bench: %s, %s, %d timed steps per variant, on %s\n", cmd.path, cfg.SampleSize(), *steps, b.Name())
	}
	res, err := bench.Run(bench.Options{Config: cfg, Variants: strings.Split(*variants, ","), Steps: *steps}, b, nil)
	if err != nil {
		return err
	}
	if *asJSON {
		err = json.NewEncoder(stdout).Encode(res)
	} else {
		err = report.PrintBench(stdout, res)
	}
	if err != nil || profile == nil {
		return err
	}
	pprof.StopCPUProfile()
	return profile.Commit()
}
