package main

import (
	"fmt"
	"io"

	"github.com/memunet/memunet/compare"
)

const gorgoniaUsage = "usage: memunet gorgonia --config FILE --out DIR [--steps N] [--set k=v ...]"

// gorgoniaCommand trains the configured UNet for --steps optimizer steps as
// plain gorgonia would (compare.RunGorgonia): compare's reference row,
// whose summary.json goes into --out.
func gorgoniaCommand(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("gorgonia", gorgoniaUsage)
	fs := cmd.Flags
	outDir := fs.String("out", "", "directory for summary.json")
	steps := fs.Int("steps", 3, "optimizer steps")
	cfg, err := cmd.load(args)
	if err != nil {
		return err
	}
	if *outDir == "" || *steps < 1 {
		return cmd.usageError("--out DIR is required and --steps must be at least 1")
	}
	return compare.RunGorgonia(cfg, *steps, *outDir, func(step int, loss, ms float64) {
		fmt.Fprintf(stdout, "gorgonia step %d/%d  loss %.4f  %.0f ms\n", step, *steps, loss, ms)
	})
}
