package main

import (
	"bytes"
	"fmt"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
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

// TestPatchRunEvalAndPredict: a data.patch run validates whole images by
// tiles; eval of its checkpoint scores them alike (the same mIoU and loss
// as training's last validation), and predict dataset:val writes each
// image's mask at its whole size.
func TestPatchRunEvalAndPredict(t *testing.T) {
	runDir, sum := trainTiny(t, "--set", "data.patch=[8,8]", "--set", "train.val_every=4", "--set", "predict.tile=12",
		"--set", "predict.overlap=0.5")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"eval", "--checkpoint", runDir, "--newest", "--out", filepath.Join(t.TempDir(), "e.json")}, &stdout, &stderr); code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr.String())
	}
	want := fmt.Sprintf("miou %.4f", sum.ValMIoU)
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("eval does not give training's %s:\n%s", want, stdout.String())
	}
	out := filepath.Join(t.TempDir(), "p")
	stdout.Reset()
	if code := run([]string{"predict", "--checkpoint", runDir, "--newest", "--input", "dataset:val", "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("predict: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("predict dataset:val does not give training's %s:\n%s", want, stdout.String())
	}
	for _, bad := range [][]string{{"--overlap", "1"}, {"--blend", "median"}, {"--tile", "10"}} {
		stderr.Reset()
		args := append([]string{"predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", filepath.Join(t.TempDir(), "q")}, bad...)
		if code := run(args, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), bad[0]) {
			t.Errorf("%v: exit %d: %s", bad, code, stderr.String())
		}
	}
	masks, _ := filepath.Glob(filepath.Join(out, "val-*.png"))
	if len(masks) == 0 {
		t.Fatalf("no masks in %s", out)
	}
	f, err := os.Open(masks[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil || cfg.Width != 16 || cfg.Height != 16 {
		t.Errorf("%s: %dx%d, %v; want the whole 16x16 image", masks[0], cfg.Width, cfg.Height, err)
	}
}
