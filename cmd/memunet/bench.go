package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu/kernels"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/train"
)

const benchUsage = "usage: memunet bench --config FILE [--steps N] [--variants config,baseline,...] [--cpuprofile FILE] [--set k=v ...] [--device D]"

// benchCommand times training steps of each variant in this process: the
// median step, the achieved GFLOP/s of the whole step (convolution FLOPs,
// 2*Cin*Cout*k*k*H*W per output, x3 for forward and backward) and the time
// per layer kind.
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
	var profile *os.File
	if *cpuProfile != "" {
		if profile, err = os.Create(*cpuProfile); err != nil {
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
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"variant", "micro x acc", "step ms", "GFLOP/s", "% peak"}
	for k := model.Kind(0); k < model.NumKinds; k++ {
		head = append(head, k.String())
	}
	fmt.Fprintln(tw, strings.Join(append(head, "optimizer", "other"), "\t")+"\t")
	for _, name := range strings.Split(*variants, ",") {
		vc, err := train.DeriveVariant(cfg, strings.TrimSpace(name))
		if err != nil {
			fmt.Fprintf(tw, "%s\t%s\t\n", name, err)
			continue
		}
		row, err := benchVariant(vc, b, *steps, peak)
		if err != nil {
			return fmt.Errorf("bench %s: %w", name, err)
		}
		fmt.Fprintln(tw, name+"\t"+strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(stdout, "per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.")
	return nil
}

func benchVariant(cfg config.Config, b backend.Backend, steps int, peak float64) ([]string, error) {
	cfg.Memory.Capacity, cfg.Memory.Fit, cfg.Memory.Timeline = 0, "off", false
	tr, err := train.NewTrainerOn(cfg, b)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	if _, err := tr.Step(); err != nil { // warm-up: the pool's cache fills
		return nil, err
	}
	tr.EnableProfile()
	tr.OptimizerTime = 0
	var times []float64
	var total time.Duration
	for range steps {
		t0 := time.Now()
		if _, err := tr.Step(); err != nil {
			return nil, err
		}
		d := time.Since(t0)
		total += d
		times = append(times, float64(d.Microseconds())/1000)
	}
	slices.Sort(times)
	med := times[len(times)/2]
	h, w := cfg.ImageSize()
	fwd, _ := tr.Net.FLOPs(h, w)
	flops := 3 * fwd * float64(cfg.Variant().EffectiveBatch())
	rate := flops / (med / 1000) / 1e9
	share := "-"
	if peak > 0 {
		share = fmt.Sprintf("%.0f", 100*rate/peak)
	}
	row := []string{cfg.Variant().Columns()[0], fmt.Sprintf("%.1f", med), fmt.Sprintf("%.1f", rate), share}
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000/float64(steps))
	}
	accounted := tr.OptimizerTime
	for k := model.Kind(0); k < model.NumKinds; k++ {
		row = append(row, per(tr.Profile.Total[k]))
		accounted += tr.Profile.Total[k]
	}
	return append(row, per(tr.OptimizerTime), per(total-accounted)), nil
}
