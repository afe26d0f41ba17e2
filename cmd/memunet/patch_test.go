package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPlanSuggestPatch: plan --suggest patch prints the largest square
// patch whose plan fits, and the next size's need; a patch run's plan is
// on the patch.
func TestPlanSuggestPatch(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := append([]string{"plan", "--config", "../../configs/quickstart.yaml", "--suggest", "patch", "--capacity", "1MiB"}, tinyArgs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"data.patch: [", "] is the largest square patch that fits 1.00 MiB", "the images' smaller side (16)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	if code := run(append([]string{"plan", "--config", "../../configs/quickstart.yaml", "--set", "data.patch=[8,8]", "--variants", "config"}, tinyArgs...), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "8x8 images") {
		t.Errorf("plan of a patch run: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if code := run([]string{"plan", "--config", "../../configs/quickstart.yaml", "--suggest", "tile"}, &stdout, &stderr); code != 2 {
		t.Errorf("--suggest tile: exit %d, want 2", code)
	}
}
