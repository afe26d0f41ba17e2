package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/memunet/memunet/backend/cpu/kernels"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/train"
)

const benchUsage = "usage: memunet bench --config FILE [--steps N] [--variants config,baseline,...] [--cpuprofile FILE] [--set k=v ...] [--device D]"

// benchCommand times training steps of each variant in this process
// (train.Bench): the median step, the achieved GFLOP/s of the whole step
// and the time per layer kind.
func benchCommand(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("bench", benchUsage)
	cmd.addDevice()
	fs := cmd.Flags
	steps := fs.Int("steps", 5, "timed optimizer steps per variant (after one warm-up step)")
	variants := fs.String("variants", "config", "comma-separated variants (config, "+strings.Join(train.VariantNames(), ", ")+")")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the variants' runs (set-up and warm-up included) to `FILE`, for go tool pprof")
	cfg, err := cmd.load(args)
	if err != nil {
		return err
	}
	if *steps < 1 {
		return cmd.usageError("--steps must be at least 1")
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
	}
	h, w := cfg.ImageSize()
	fmt.Fprintf(stdout, "memunet bench: %s, %dx%d, %d timed steps per variant (median), GFLOP/s of the whole step\n", cmd.path, h, w, *steps)
	// Every variant runs on one backend, opened once. On the CPU, the
	// step's GFLOP/s is also given as a share of what the GEMM micro-kernel
	// computes from L1 on the same cores: the FMA peak.
	b, err := train.Target(cfg)
	if err != nil {
		return err
	}
	var peak float64
	if b.Name() == "cpu" {
		peak = kernels.MicroKernelPeak(300 * time.Millisecond)
		fmt.Fprintf(stdout, "FMA peak: %.1f GFLOP/s (%s micro-kernel from L1 on %d cores, GOMAXPROCS)\n", peak, kernels.GemmImplementation(), runtime.GOMAXPROCS(0))
	}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return fmt.Errorf("bench: --cpuprofile %s: %w", *cpuProfile, err)
		}
		defer pprof.StopCPUProfile()
	}
	table := report.NewBenchTable(stdout, peak)
	for _, name := range strings.Split(*variants, ",") {
		vc, err := train.DeriveVariant(cfg, strings.TrimSpace(name))
		if err != nil {
			table.Failed(name, err)
			continue
		}
		row, err := train.Bench(vc, b, *steps)
		if err != nil {
			return fmt.Errorf("bench %s: %w", name, err)
		}
		table.Row(name, row)
	}
	if err := table.Finish(); err != nil || profile == nil {
		return err
	}
	pprof.StopCPUProfile()
	return profile.Commit()
}
