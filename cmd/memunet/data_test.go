package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/data"
)

const quickstartYAML = "../../configs/quickstart.yaml"

// tinyModel trains a few steps of a tiny network.
var tinyModel = []string{
	"--set", "model.base=4", "--set", "model.depth=2", "--set", "train.batch_size=4", "--set", "train.steps=4",
	"--set", "train.val_every=2", "--set", "train.checkpoint_every=0", "--set", "output.progress=none",
}

func mustWrite(t *testing.T, path string, encode func(*bytes.Buffer) error) {
	t.Helper()
	var b bytes.Buffer
	if err := encode(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// carvanaLike writes n synthetic samples of one size as Carvana has its
// data: DIR/images/car_NN.jpg and DIR/masks/car_NN_mask.gif, each mask a
// black/white GIF (palette index 1 where any shape is).
func carvanaLike(t *testing.T, dir string, n, size int) {
	t.Helper()
	syn, err := data.NewSynthetic(data.SyntheticConfig{Count: n, Size: size, Classes: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		img, mask, err := syn.Image(i)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("car_%02d", i)
		mustWrite(t, filepath.Join(dir, "images", name+".jpg"), func(b *bytes.Buffer) error { return jpeg.Encode(b, img, &jpeg.Options{Quality: 95}) })
		m := image.NewPaletted(mask.Bounds(), color.Palette{color.Gray{0}, color.Gray{255}})
		for p, v := range mask.Pix {
			m.Pix[p] = min(v, 1)
		}
		mustWrite(t, filepath.Join(dir, "masks", name+"_mask.gif"), func(b *bytes.Buffer) error { return gif.Encode(b, m, nil) })
	}
}

// vocLike writes a VOC root: synthetic samples of two sizes (so training
// needs data.resize) as JPEGImages/ID.jpg, palette masks
// SegmentationClass/ID.png with a 255 border around each shape, and the
// train and val lists.
func vocLike(t *testing.T, dir string, nTrain, nVal int) {
	t.Helper()
	pal := data.MaskPalette()
	var lists [2][]string
	for i := range nTrain + nVal {
		size := 32 + 8*(i%2)
		syn, err := data.NewSynthetic(data.SyntheticConfig{Count: nTrain + nVal, Size: size, Classes: 3, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		img, mask, err := syn.Image(i)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("2008_%06d", i)
		mustWrite(t, filepath.Join(dir, "JPEGImages", id+".jpg"), func(b *bytes.Buffer) error { return jpeg.Encode(b, img, &jpeg.Options{Quality: 95}) })
		m := image.NewPaletted(mask.Bounds(), pal)
		copy(m.Pix, mask.Pix)
		for p, v := range mask.Pix {
			if x := p % size; v == 0 && x+1 < size && mask.Pix[p+1] != 0 {
				m.Pix[p] = 255
			}
		}
		mustWrite(t, filepath.Join(dir, "SegmentationClass", id+".png"), func(b *bytes.Buffer) error { return png.Encode(b, m) })
		k := 0
		if i >= nTrain {
			k = 1
		}
		lists[k] = append(lists[k], id)
	}
	for k, name := range []string{"train.txt", "val.txt"} {
		mustWrite(t, filepath.Join(dir, "ImageSets", "Segmentation", name), func(b *bytes.Buffer) error {
			_, err := b.WriteString(strings.Join(lists[k], "\n") + "\n")
			return err
		})
	}
}

func readSummary(t *testing.T, dir string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// runCapture is run with os.Stderr captured too: the trainer prints the
// data summary there.
func runCapture(t *testing.T, args []string, stdout, stderr *bytes.Buffer) int {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = f
	code := run(args, stdout, stderr)
	os.Stderr = saved
	f.Close()
	b, _ := os.ReadFile(f.Name())
	stderr.Write(b)
	return code
}

func trainArgs(out string, sets ...string) []string {
	args := []string{"train", "--config", quickstartYAML, "--out", out}
	args = append(args, tinyModel...)
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

func TestTrainOnCarvanaLikeFolder(t *testing.T) {
	ds, out := t.TempDir(), t.TempDir()
	carvanaLike(t, ds, 12, 32)
	var stdout, stderr bytes.Buffer
	code := runCapture(t, trainArgs(out, "data.source=folder", "data.path="+ds, "data.mask_suffix=_mask", "model.classes=2",
		"data.val_fraction=0.25", "data.flip=true"), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	sum := readSummary(t, out)
	if sum["steps"].(float64) != 4 || sum["final_loss"].(float64) <= 0 {
		t.Errorf("summary: %v", sum)
	}
	// The mask values were discovered by a scan and the mapping printed.
	if !strings.Contains(stderr.String(), "mask values found by a scan: 0->0 1->1") {
		t.Errorf("stderr does not show the discovered mapping: %s", stderr.String())
	}
}

func TestTrainOnVOCLike(t *testing.T) {
	ds, out := t.TempDir(), t.TempDir()
	vocLike(t, ds, 9, 3)
	var stdout, stderr bytes.Buffer
	// Two image sizes: without data.resize it stops before training and says so.
	code := run(trainArgs(out, "data.source=voc", "data.path="+ds, "model.classes=3"), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "data.resize") || !strings.Contains(stderr.String(), "JPEGImages") {
		t.Fatalf("two sizes without resize: exit %d: %s", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = runCapture(t, trainArgs(out, "data.source=voc", "data.path="+ds, "model.classes=3", "data.resize=[32, 32]",
		"data.mean=[0.485, 0.456, 0.406]", "data.std=[0.229, 0.224, 0.225]"), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "12 samples (train 9, val 3)") {
		t.Errorf("the split is not the VOC lists': %s", stderr.String())
	}
	if sum := readSummary(t, out); sum["steps"].(float64) != 4 {
		t.Errorf("summary: %v", sum)
	}
}

// A bad file stops `memunet train` before the first step, naming the file;
// no metrics are written.
func TestTrainStopsOnBadFile(t *testing.T) {
	ds, out := t.TempDir(), t.TempDir()
	carvanaLike(t, ds, 8, 32)
	bad := filepath.Join(ds, "masks", "car_05_mask.gif")
	raw, _ := os.ReadFile(bad)
	if err := os.WriteFile(bad, raw[:len(raw)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(trainArgs(out, "data.source=folder", "data.path="+ds, "data.mask_suffix=_mask", "model.classes=2"), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), bad) || !strings.Contains(stderr.String(), "truncated") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "metrics.jsonl")); err == nil {
		t.Error("metrics.jsonl written: training started")
	}
}

func TestDataSynthThenCheckAndTrain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shapes")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"data", "synth", "--out", dir, "--count", "16", "--size", "16", "--classes", "3"}, &stdout, &stderr); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "wrote 16 samples") || !strings.Contains(stdout.String(), "data.path="+dir) {
		t.Errorf("synth output: %s", stdout.String())
	}
	for _, sub := range []string{"images/00000.png", "masks/00015.png"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err != nil {
			t.Error(err)
		}
	}
	// Writing again would overwrite: refused.
	if code := run([]string{"data", "synth", "--out", dir}, &stdout, &stderr); code != 1 {
		t.Errorf("synth into a full directory: exit %d", code)
	}

	stdout.Reset()
	stderr.Reset()
	sets := []string{"--set", "data.source=folder", "--set", "data.path=" + dir, "--set", "model.classes=3"}
	if code := run(append([]string{"data", "check", "--config", quickstartYAML}, sets...), &stdout, &stderr); code != 0 {
		t.Fatalf("check: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	for _, w := range []string{"samples: 16 (train 14, val 2", "16x16: 16", "  0 -> class 0:", "  2 -> class 2:",
		"data.mask_values: [0, 1, 2]", "problems: none", "ok: the dataset is ready"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("check output lacks %q:\n%s", w, stdout.String())
		}
	}

	out := t.TempDir()
	stdout.Reset()
	stderr.Reset()
	args := trainArgs(out, "data.source=folder", "data.path="+dir, "model.classes=3", "data.mask_values=[0, 1, 2]")
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr.String())
	}
}

func TestDataCheckReportsProblems(t *testing.T) {
	dir := t.TempDir()
	carvanaLike(t, dir, 6, 32)
	os.Remove(filepath.Join(dir, "masks", "car_02_mask.gif"))
	mustWrite(t, filepath.Join(dir, "masks", "car_04_mask.gif"), func(b *bytes.Buffer) error {
		return gif.Encode(b, image.NewPaletted(image.Rect(0, 0, 16, 16), color.Palette{color.Gray{0}, color.Gray{255}}), nil)
	})
	var stdout, stderr bytes.Buffer
	code := run([]string{"data", "check", "--config", quickstartYAML, "--set", "data.source=folder", "--set", "data.path=" + dir,
		"--set", "data.mask_suffix=_mask", "--set", "model.classes=2"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{
		"error: " + filepath.Join(dir, "images", "car_02.jpg") + ": has no mask",
		"error: " + filepath.Join(dir, "masks", "car_04_mask.gif") + ": is 16x16 (height x width) but its image",
	} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("check output lacks %q:\n%s", w, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "memunet: data check: 2 problems stop training") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestDataUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"data"}, {"data", "nope"}, {"data", "synth"}, {"data", "check"}, {"data", "synth", "--out", "x", "--size", "3"},
		{"data", "check", "--config", quickstartYAML, "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 || !strings.HasPrefix(stderr.String(), "memunet: data") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// data.resize trains at the resized size, and the logged activation memory
// shrinks with the pixel count: 64x64 has 4 times the pixels of 32x32.
func TestResizeShrinksActivations(t *testing.T) {
	ds := t.TempDir()
	carvanaLike(t, ds, 12, 48)
	acts := map[int]float64{}
	for _, n := range []int{64, 32} {
		out := t.TempDir()
		var stdout, stderr bytes.Buffer
		args := trainArgs(out, "data.source=folder", "data.path="+ds, "data.mask_suffix=_mask", "model.classes=2",
			fmt.Sprintf("data.resize=[%d, %d]", n, n), "train.steps=2")
		if code := runCapture(t, args, &stdout, &stderr); code != 0 {
			t.Fatalf("resize %d: exit %d: %s", n, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), fmt.Sprintf("-> %dx%d by data.resize", n, n)) {
			t.Errorf("resize %d: %s", n, stderr.String())
		}
		sum := readSummary(t, out)
		acts[n] = sum["peak_allocated_by_category"].(map[string]any)["activations"].(float64)
		t.Logf("data.resize [%d, %d]: peak activations %.0f bytes (%.2f MiB), peak allocated %.0f", n, n, acts[n], acts[n]/(1<<20), sum["peak_allocated_bytes"].(float64))
	}
	if r := acts[64] / acts[32]; r < 3.5 || r > 4.5 {
		t.Errorf("activations at 64x64 / 32x32 = %.2f, want about 4 (the pixel ratio)", r)
	}
}

// Every out-of-range flag of data synth is a usage error naming the flag
// and what it allows, 0 included (it never silently means the default),
// and nothing is written.
func TestDataSynthFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--size", "0", "--size: 0: must be between 16 and 4096"},
		{"--size", "-8", "--size: -8: must be between 16 and 4096"},
		{"--size", "8", "--size: 8: must be between 16 and 4096"},
		{"--size", "5000", "--size: 5000: must be between 16 and 4096"},
		{"--count", "0", "--count: 0: must be at least 1"},
		{"--count", "-3", "--count: -3: must be at least 1"},
		{"--classes", "0", "--classes: 0: must be between 2 and 4"},
		{"--classes", "1", "--classes: 1: must be between 2 and 4"},
		{"--classes", "5", "--classes: 5: must be between 2 and 4"},
		{"--classes", "-1", "--classes: -1: must be between 2 and 4"},
		{"--noise", "-0.1", "--noise: -0.1: must be between 0 and 1"},
		{"--noise", "1.5", "--noise: 1.5: must be between 0 and 1"},
		{"--noise", "NaN", "--noise: NaN: must be between 0 and 1"},
		{"--noise", "Inf", "--noise: +Inf: must be between 0 and 1"},
	} {
		out := filepath.Join(t.TempDir(), "shapes")
		var stdout, stderr bytes.Buffer
		code := run([]string{"data", "synth", "--out", out, tc.flag, tc.value}, &stdout, &stderr)
		if code != 2 || !strings.HasPrefix(stderr.String(), "memunet: data synth: "+tc.want) {
			t.Errorf("%s %s: exit %d, stderr %q; want 2 and %q", tc.flag, tc.value, code, stderr.String(), tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s %s: %s was written", tc.flag, tc.value, out)
		}
	}
}

// data synth --noise 0 means no noise: the background is one color.
func TestDataSynthNoNoise(t *testing.T) {
	out := filepath.Join(t.TempDir(), "shapes")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"data", "synth", "--out", out, "--count", "2", "--size", "16", "--noise", "0"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	f, err := os.Open(filepath.Join(out, "images", "00000.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	colors := map[color.Color]bool{}
	for y := range 16 {
		for x := range 16 {
			colors[img.At(x, y)] = true
		}
	}
	if len(colors) > 4 { // the background and up to 3 shapes
		t.Errorf("--noise 0 wrote an image of %d colors", len(colors))
	}
}

// data check reads 16-bit gray masks by value and says so: the values
// 0, 300 and 1000 (high bytes 0, 1 and 3) are three classes, whether found
// by the scan or listed in data.mask_values; a value not listed is an
// error naming the mask.
func TestDataCheck16BitMasks(t *testing.T) {
	dir := t.TempDir()
	syn, err := data.NewSynthetic(data.SyntheticConfig{Count: 6, Size: 16, Classes: 3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	vals := []uint16{0, 300, 1000}
	for i := range 6 {
		img, mask, err := syn.Image(i)
		if err != nil {
			t.Fatal(err)
		}
		m := image.NewGray16(mask.Bounds())
		for p, c := range mask.Pix {
			m.SetGray16(p%16, p/16, color.Gray16{Y: vals[c]})
		}
		if i == 5 {
			m.SetGray16(3, 4, color.Gray16{Y: 301})
		}
		name := fmt.Sprintf("%02d.png", i)
		mustWrite(t, filepath.Join(dir, "images", name), func(b *bytes.Buffer) error { return png.Encode(b, img) })
		mustWrite(t, filepath.Join(dir, "masks", name), func(b *bytes.Buffer) error { return png.Encode(b, m) })
	}
	check := func(sets ...string) (int, string, string) {
		args := []string{"data", "check", "--config", quickstartYAML, "--set", "data.source=folder", "--set", "data.path=" + dir, "--set", "model.classes=3"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	// Value 301 in mask 05: four values for three classes.
	code, out, _ := check()
	if code != 1 || !strings.Contains(out, "4 distinct values [0 300 301 1000]") {
		t.Errorf("scan with 301: exit %d:\n%s", code, out)
	}
	code, out, _ = check("data.mask_values=[0, 300, 1000]")
	bad := filepath.Join(dir, "masks", "05.png")
	if code != 1 || !strings.Contains(out, "error: "+bad+": mask value 301 (1 pixels) is not a class") {
		t.Errorf("mask_values without 301: exit %d:\n%s", code, out)
	}

	// Without 301 both ways read the same three classes.
	mask5 := image.NewGray16(image.Rect(0, 0, 16, 16))
	_, m5, _ := syn.Image(5)
	for p, c := range m5.Pix {
		mask5.SetGray16(p%16, p/16, color.Gray16{Y: vals[c]})
	}
	mustWrite(t, bad, func(b *bytes.Buffer) error { return png.Encode(b, mask5) })
	for _, sets := range [][]string{nil, {"data.mask_values=[0, 300, 1000]"}} {
		code, out, errOut := check(sets...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s%s", sets, code, out, errOut)
		}
		for _, w := range []string{"masks: 16-bit gray PNG (6 masks; values read whole, 0..65535)",
			"     0 -> class 0:", "   300 -> class 1:", "  1000 -> class 2:", "problems: none"} {
			if !strings.Contains(out, w) {
				t.Errorf("%v: check output lacks %q:\n%s", sets, w, out)
			}
		}
	}
}

// TestDataPreview: data preview draws the training samples as an epoch
// sees them: augmentation changes the picture, the same epoch draws the
// same, another epoch other choices.
func TestDataPreview(t *testing.T) {
	dir := t.TempDir()
	base := []string{"data", "preview", "--config", "../../configs/quickstart.yaml", "--set", "data.size=16", "--set", "data.count=24", "--count", "4"}
	aug := append(append([]string{}, base...), "--set", "data.augment.rot90=true", "--set", "data.augment.vflip=true", "--set", "data.augment.contrast=0.5")
	read := func(args ...string) []byte {
		t.Helper()
		runOK(t, args...)
		b, err := os.ReadFile(filepath.Join(dir, "p.png"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain := read(append(base, "--out", filepath.Join(dir, "p.png"))...)
	a1 := read(append(aug, "--out", filepath.Join(dir, "p.png"))...)
	a1again := read(append(aug, "--out", filepath.Join(dir, "p.png"))...)
	a2 := read(append(aug, "--out", filepath.Join(dir, "p.png"), "--epoch", "2")...)
	if bytes.Equal(plain, a1) || !bytes.Equal(a1, a1again) || bytes.Equal(a1, a2) {
		t.Errorf("plain==aug %v, aug==aug %v, epoch1==epoch2 %v", bytes.Equal(plain, a1), bytes.Equal(a1, a1again), bytes.Equal(a1, a2))
	}
	var o, e bytes.Buffer
	if code := run(append(base, "--count", "0"), &o, &e); code != 2 {
		t.Errorf("--count 0: exit %d", code)
	}
	if code := run(append(base, "--set", "data.augment.contrast=2"), &o, &e); code != 1 || !strings.Contains(e.String(), "contrast") {
		t.Errorf("contrast 2: exit %d, %s", code, e.String())
	}
}

// TestHintsArePasteable: the commands memunet suggests are the user's
// own, with the same --config and --set flags, and do what they say when
// pasted: data synth's check line checks the new set, and a dataset with
// several problems names the data check that lists them all, and a train
// into a folder that holds a run names the commands that continue it and
// that start again.
func TestHintsArePasteable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shapes")
	out := runOK(t, "data", "synth", "--out", dir, "--count", "12", "--size", "16", "--classes", "3")
	const prog = "go run ./cmd/memunet " // what a test binary reads as
	var check string
	for _, line := range strings.Split(out, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), prog+"data check "); ok {
			check = c
		}
	}
	if check == "" {
		t.Fatalf("synth suggests no data check:\n%s", out)
	}
	if got := runOK(t, append([]string{"data", "check"}, strings.Fields(check)...)...); !strings.Contains(got, "ok: the dataset is ready") {
		t.Errorf("the suggested check:\n%s", got)
	}

	for _, n := range []string{"00003", "00007"} {
		if err := os.Remove(filepath.Join(dir, "masks", n+".png")); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	args := trainArgs(t.TempDir(), "data.source=folder", "data.path="+dir, "model.classes=3")
	if code := run(args, &stdout, &stderr); code != 1 {
		t.Fatalf("train on a set with two problems: exit %d", code)
	}
	msg := stderr.String()
	_, rest, ok := strings.Cut(msg, "(and 1 more problem; "+prog+"data check ")
	check, _, ok2 := strings.Cut(rest, " lists them all)")
	if !ok || !ok2 {
		t.Fatalf("no pasteable data check in %q", msg)
	}
	stdout.Reset()
	run(append([]string{"data", "check"}, strings.Fields(check)...), &stdout, &stderr)
	for _, n := range []string{"00003", "00007"} {
		if !strings.Contains(stdout.String(), n) {
			t.Errorf("the suggested check does not list %s:\n%s", n, stdout.String())
		}
	}

	// A new run into a folder that holds one: the refusal ends with the
	// two ways on, each a command; pasted, the first continues that run
	// (finished, so it says so), the second trains anew with the flags given.
	runDir, _ := trainTiny(t)
	flags := append([]string{"--config", "../../configs/quickstart.yaml"}, tinyArgs...)
	flags = append(flags, "--set", "train.steps=6")
	again := append([]string{"train", "--out", runDir}, flags...)
	stdout.Reset()
	stderr.Reset()
	if code := run(again, &stdout, &stderr); code != 1 {
		t.Fatalf("train into a used folder: exit %d: %s", code, stderr.String())
	}
	msg = strings.TrimSpace(stderr.String())
	_, rest, ok = strings.Cut(msg, "; or continue it: ")
	cont, startAgain, ok2 := strings.Cut(rest, "; or delete those files and start again: ")
	if !ok || !ok2 {
		t.Fatalf("the refusal does not end with the two commands: %q", msg)
	}
	if want := prog + "train --resume auto --out " + runDir; cont != want {
		t.Errorf("continue: %q, want %q", cont, want)
	}
	if want := prog + "train " + strings.Join(flags, " ") + " --out " + runDir + " --force"; startAgain != want {
		t.Errorf("start again: %q, want %q", startAgain, want)
	}
	if out := runOK(t, strings.Fields(strings.TrimPrefix(cont, prog))...); !strings.Contains(out, runDir+" already finished: 4/4 steps") {
		t.Errorf("the pasted continue did not find the run:\n%s", out)
	}
	runOK(t, strings.Fields(strings.TrimPrefix(startAgain, prog))...)
	if sum := ckSummary(t, runDir); sum.Steps != 6 {
		t.Errorf("the pasted start again trained %d steps, want 6", sum.Steps)
	}
}
