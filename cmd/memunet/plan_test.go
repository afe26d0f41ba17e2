package main

import (
	"strings"
	"testing"
)

// TestPlanFitsAndRecommendsFlags: plan's table fits 100 columns (variants
// that cannot be planned are named below it, not in a cell), --wide adds
// the split by category and phase, and a recommendation ends with the
// exact flags that apply it: added to the command, plan then recommends
// the configuration as it is.
func TestPlanFitsAndRecommendsFlags(t *testing.T) {
	base := []string{"plan", "--config", "quickstart", "--capacity", "4MiB"}
	out := runOK(t, base...)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if len(line) > 100 {
			t.Errorf("a line of %d columns:\n%s", len(line), line)
		}
	}
	// Two micro-batches of 4 fit and cost less than accum4's four of 2.
	const flags = "--set train.batch_size=4 --set train.accumulate=2"
	if !strings.HasSuffix(strings.TrimSpace(out), "recommended fastest-fit, the fitting variant with the lowest estimated time;\nto train it, add to your command: "+flags) {
		t.Errorf("plan --capacity 4MiB does not end with the fastest fitting setting's flags:\n%s", out)
	}
	if strings.Contains(out, "activations") {
		t.Errorf("the default table has the split by category:\n%s", out)
	}
	applied := runOK(t, append(base, strings.Fields(flags)...)...)
	if !strings.HasSuffix(strings.TrimSpace(applied), "recommended config, the fitting variant with the lowest estimated time:\nthe configuration as it is") {
		t.Errorf("with the recommended flags, plan recommends another change:\n%s", applied)
	}
	wide := runOK(t, append(base, "--wide")...)
	for _, col := range []string{"params", "activations", "workspace", "forward", "backward", "opt step", "validation"} {
		if !strings.Contains(wide, col) {
			t.Errorf("plan --wide lacks %q", col)
		}
	}
	// A variant that cannot be planned is a line below the table.
	odd := runOK(t, "plan", "--config", "quickstart", "--set", "train.batch_size=2", "--variants", "config,accum4,offload", "--capacity", "3MiB")
	if !strings.Contains(odd, "\naccum4: needs an effective batch") {
		t.Errorf("accum4 at batch 2 is not named below the table:\n%s", odd)
	}
	if !strings.Contains(odd, " offload        2 x 1") || !strings.Contains(odd, "to train it, add to your command: --set train.batch_size=1 --set train.accumulate=2") {
		t.Errorf("offload's row, or the fastest fitting setting's flags:\n%s", odd)
	}
	for _, line := range strings.Split(strings.TrimSpace(odd), "\n") {
		if len(line) > 100 {
			t.Errorf("a line of %d columns:\n%s", len(line), line)
		}
	}
}
