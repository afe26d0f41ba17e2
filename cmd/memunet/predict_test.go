package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/safetensors"
)

// trainTiny trains the tiny network into a new run directory and returns it
// with its summary.
func trainTiny(t *testing.T, extra ...string) (string, rundir.Summary) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", dir}, tinyArgs...)
	args = append(args, extra...)
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr.String())
	}
	return dir, ckSummary(t, dir)
}

func ckSummary(t *testing.T, dir string) rundir.Summary {
	t.Helper()
	var sum rundir.Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
	}
	return stdout.String()
}

// bestPredictor is an fp32 predictor, batch 1, of the run's best
// checkpoint (what a run directory stands for), closed at the test's end.
func bestPredictor(t *testing.T, runDir string) *predict.Predictor {
	t.Helper()
	ck, err := checkpoint.Open(ckSummary(t, runDir).BestCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.NewPredictor(ck, backend.Float32, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// readReport reads predict.json in dir.
func readReport(t *testing.T, dir string) predict.Report {
	t.Helper()
	var rep predict.Report
	b, err := os.ReadFile(filepath.Join(dir, "predict.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// TestPredictReproducesValMIoU: predicting the synthetic validation images
// from the checkpoint training ended with gives training's final val_miou
// (within 1e-6), in fp32 and fp16, and writes one palette mask per image.
func TestPredictReproducesValMIoU(t *testing.T) {
	for _, prec := range []string{"fp32", "fp16"} {
		t.Run(prec, func(t *testing.T) {
			runDir, sum := trainTiny(t, "--set", "train.precision="+prec)
			out := t.TempDir()
			stdout := runOK(t, "predict", "--checkpoint", runDir, "--newest", "--input", "dataset:val", "--out", out, "--overlay")
			rep := readReport(t, out)
			if rep.Metrics == nil || math.Abs(rep.Metrics.ValMIoU-sum.ValMIoU) > 1e-6 {
				t.Fatalf("predict val miou %v, training's %v", rep.Metrics, sum.ValMIoU)
			}
			if rep.TrainingValMIoU == nil || *rep.TrainingValMIoU != sum.ValMIoU || rep.Precision.String() != prec {
				t.Errorf("report: training val miou %v, precision %s", rep.TrainingValMIoU, rep.Precision)
			}
			if !strings.Contains(stdout, "miou") {
				t.Errorf("stdout %q", stdout)
			}
			if len(rep.Outputs) != rep.Images || rep.Images == 0 {
				t.Fatalf("%d outputs for %d images", len(rep.Outputs), rep.Images)
			}
			for _, o := range rep.Outputs {
				m, ok := readPNG(t, filepath.Join(out, o.Mask)).(*image.Paletted)
				if !ok || m.Bounds().Dx() != 16 {
					t.Fatalf("%s is not a 16x16 palette PNG", o.Mask)
				}
				for _, v := range m.Pix {
					if v >= 4 {
						t.Fatalf("%s: class %d of 4", o.Mask, v)
					}
				}
				if o.Overlay == "" {
					t.Errorf("no overlay for %s", o.Input)
				} else {
					readPNG(t, filepath.Join(out, o.Overlay))
				}
			}
		})
	}
}

// TestPredictFiles: image files of any size are scaled to the training
// size as data.resize scales them, and their masks scaled back; an image of
// the training size gives exactly the classes of the same image read
// through the training pipeline.
func TestPredictFiles(t *testing.T) {
	runDir, _ := trainTiny(t)
	syn, err := data.NewSynthetic(data.SyntheticConfig{Count: 3, Size: 16, Classes: 4, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	sizes := map[string][2]int{"a.png": {16, 16}, "b.png": {24, 20}, "c.png": {32, 32}}
	for i, name := range []string{"a.png", "b.png", "c.png"} {
		img, _, err := syn.Image(i)
		if err != nil {
			t.Fatal(err)
		}
		var m image.Image = img
		if s := sizes[name]; s[0] != 16 {
			r, err := data.Resize(syn, s[1], s[0])
			if err != nil {
				t.Fatal(err)
			}
			m, _, _ = r.(data.ImageSource).Image(i)
		}
		f, _ := os.Create(filepath.Join(in, name))
		png.Encode(f, m)
		f.Close()
	}
	os.WriteFile(filepath.Join(in, "notes.txt"), []byte("not an image"), 0o644)
	out := t.TempDir()
	runOK(t, "predict", "--checkpoint", runDir, "--input", in, "--out", out, "--overlay", "--batch", "2")
	for name, s := range sizes {
		stem := strings.TrimSuffix(name, ".png")
		m := readPNG(t, filepath.Join(out, stem+".png"))
		if b := m.Bounds(); b.Dx() != s[0] || b.Dy() != s[1] {
			t.Errorf("%s: mask %v, image %v", name, b, s)
		}
		if o := readPNG(t, filepath.Join(out, stem+"_overlay.png")); o.Bounds() != m.Bounds() {
			t.Errorf("%s: overlay %v", name, o.Bounds())
		}
	}

	// a.png is 16x16: its mask is the prediction on data.Resize's sample,
	// by the run's best checkpoint (what a run directory stands for).
	p := bestPredictor(t, runDir)
	r, _ := data.Resize(syn, 16, 16)
	img := make([]float32, 3*16*16)
	if err := r.Sample(0, img, make([]uint8, 256)); err != nil {
		t.Fatal(err)
	}
	want, err := p.Predict(img, 1, 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	got := readPNG(t, filepath.Join(out, "a.png")).(*image.Paletted).Pix
	if !bytes.Equal(got, want) {
		t.Error("a.png's mask differs from the prediction through the training pipeline")
	}

	// Single file input, and errors.
	runOK(t, "predict", "--checkpoint", runDir, "--input", filepath.Join(in, "b.png"), "--out", t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := run([]string{"predict", "--checkpoint", runDir, "--input", filepath.Join(in, "notes.txt"), "--out", t.TempDir()}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "notes.txt: not a PNG, JPEG or GIF") {
		t.Errorf("text file: exit %d, %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"predict", "--input", in, "--out", t.TempDir()}, &stdout, &stderr); code != 2 {
		t.Errorf("no --checkpoint: exit %d", code)
	}
}

// TestExport: the exported file holds the state_dict (PyTorch names, state_dict
// order, num_batches_tracked as I64 scalars) with the checkpoint's values.
func TestExport(t *testing.T) {
	runDir, sum := trainTiny(t)
	out := filepath.Join(t.TempDir(), "model.safetensors")
	runOK(t, "export", "--checkpoint", sum.LastCheckpoint, "--out", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	ckFile, _ := os.ReadFile(filepath.Join(sum.LastCheckpoint, runfiles.Model))
	ckTensors, _ := safetensors.Parse(ckFile)
	if len(f.Tensors) != len(ckTensors.Tensors) {
		t.Fatalf("%d tensors exported, checkpoint has %d", len(f.Tensors), len(ckTensors.Tensors))
	}
	for i, x := range ckTensors.Tensors {
		y := f.Tensors[i]
		if x.Name != y.Name || x.DType != y.DType || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("tensor %d: %s %s vs %s %s", i, x.Name, x.DType, y.Name, y.DType)
		}
	}
	names := []string{f.Tensors[0].Name, f.Tensors[1].Name, f.Tensors[2].Name, f.Tensors[3].Name, f.Tensors[4].Name, f.Tensors[5].Name}
	if strings.Join(names, " ") != "inc.double_conv.0.weight inc.double_conv.1.weight inc.double_conv.1.bias inc.double_conv.1.running_mean inc.double_conv.1.running_var inc.double_conv.1.num_batches_tracked" {
		t.Errorf("first names %v", names)
	}
	nbt, _ := f.Get("inc.double_conv.1.num_batches_tracked")
	if v, err := nbt.Int64(); err != nil || len(nbt.Shape) != 0 || v[0] != int64(sum.Steps) {
		t.Errorf("num_batches_tracked %v %v shape %v, want %d", v, err, nbt.Shape, sum.Steps)
	}
	last := f.Tensors[len(f.Tensors)-1]
	if last.Name != "outc.conv.bias" || f.Metadata["format"] != "pt" || !strings.Contains(f.Metadata["memunet_model"], `"base":4`) {
		t.Errorf("last %s, metadata %v", last.Name, f.Metadata)
	}

	half := filepath.Join(t.TempDir(), "half.safetensors")
	runOK(t, "export", "--checkpoint", runDir, "--out", half, "--dtype", "bf16")
	b, _ = os.ReadFile(half)
	h, err := safetensors.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := h.Get("inc.double_conv.0.weight"); w.DType != safetensors.BF16 {
		t.Errorf("bf16 export has %s", w.DType)
	}
	if n, _ := h.Get("inc.double_conv.1.num_batches_tracked"); n.DType != safetensors.I64 {
		t.Errorf("counts exported as %s", n.DType)
	}
}

// TestResumeCommand: train --resume auto continues a run from its own
// checkpoint and configuration; refusals exit 1 with the reason, usage
// mistakes exit 2.
func TestResumeCommand(t *testing.T) {
	dir, first := trainTiny(t)
	stdout := runOK(t, "train", "--resume", "auto", "--out", dir, "--set", "train.steps=6", "--set", "output.progress=plain")
	sum := ckSummary(t, dir)
	if sum.Steps != 6 || sum.ResumedFrom != first.LastCheckpoint || !strings.Contains(stdout, "resuming from") {
		t.Errorf("resumed run: %d steps from %q; stdout %s", sum.Steps, sum.ResumedFrom, stdout)
	}
	// --resume PATH alone: the run directory is the checkpoint's.
	runOK(t, "train", "--resume", sum.LastCheckpoint, "--set", "train.steps=7")
	if s := ckSummary(t, dir); s.Steps != 7 {
		t.Errorf("resume by path: %d steps", s.Steps)
	}

	var out, errb bytes.Buffer
	if code := run([]string{"train", "--resume", "auto"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--out DIR") {
		t.Errorf("auto without --out: exit %d, %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"train", "--resume", "auto", "--out", t.TempDir()}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "no checkpoint") {
		t.Errorf("auto in an empty run: exit %d, %s", code, errb.String())
	}
	errb.Reset()
	latest, _ := checkpoint.Latest(filepath.Join(dir, runfiles.Checkpoints))
	os.Truncate(filepath.Join(latest, runfiles.Model), 10)
	if code := run([]string{"train", "--resume", "auto", "--out", dir, "--set", "train.steps=9"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "model.safetensors is truncated") {
		t.Errorf("truncated: exit %d, %s", code, errb.String())
	}
}

// TestPredictUsesTheBestCheckpoint: --checkpoint RUN_DIR is the run's best
// checkpoint by val_miou (the run directory's "best" link and summary.json
// name it), --newest its newest; without --out the masks go into the run
// directory.
func TestPredictUsesTheBestCheckpoint(t *testing.T) {
	runDir, sum := trainTiny(t, "--set", "train.steps=6", "--set", "train.checkpoint_every=1", "--set", "train.keep_last=1")
	if sum.BestCheckpoint == "" || sum.BestValMIoU == nil {
		t.Fatalf("summary.json names no best checkpoint: %+v", sum)
	}
	if link, err := os.Readlink(filepath.Join(runDir, "best")); err != nil || filepath.Join(runDir, link) != sum.BestCheckpoint {
		t.Errorf("the run's best link: %q, %v; want %s", link, err, sum.BestCheckpoint)
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{{nil, sum.BestCheckpoint}, {[]string{"--newest", "--force"}, sum.LastCheckpoint}} {
		args := append([]string{"predict", "--checkpoint", runDir, "--input", "dataset:val"}, tc.flags...)
		stdout := runOK(t, args...)
		var rep predict.Report
		ck, _ := checkpoint.Open(tc.want)
		out := filepath.Join(runDir, "predict", fmt.Sprintf("val-step-%08d", ck.Manifest.Step))
		b, err := os.ReadFile(filepath.Join(out, "predict.json"))
		if err != nil {
			t.Fatalf("%v: %v (stdout %q)", tc.flags, err, stdout)
		}
		if err := json.Unmarshal(b, &rep); err != nil || rep.Checkpoint != tc.want {
			t.Errorf("%v: predicted with %q, want %q (%v)", tc.flags, rep.Checkpoint, tc.want, err)
		}
	}
}

// TestPredictNamesAndLegend: predictions of a folder dataset's validation
// split are named after their source files; every predict writes
// legend.png and lists each class's color in predict.json, the colors of
// the masks' palette.
func TestPredictNamesAndLegend(t *testing.T) {
	ds := filepath.Join(t.TempDir(), "shapes")
	runOK(t, "data", "synth", "--out", ds, "--count", "12", "--size", "16")
	runDir, _ := trainTiny(t, "--set", "data.source=folder", "--set", "data.path="+ds)
	out := t.TempDir()
	runOK(t, "predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", out, "--overlay")
	rep := readReport(t, out)
	if len(rep.Outputs) == 0 {
		t.Fatal("no outputs")
	}
	images, err := os.ReadDir(filepath.Join(ds, "images"))
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]bool{}
	for _, de := range images {
		sources[strings.TrimSuffix(de.Name(), filepath.Ext(de.Name()))] = true
	}
	for _, o := range rep.Outputs {
		stem := strings.TrimSuffix(o.Mask, ".png")
		if !sources[stem] || o.Overlay != stem+"_overlay.png" {
			t.Errorf("output %+v is not named after a source image (%v)", o, sources)
		}
		if _, err := os.Stat(filepath.Join(out, o.Overlay)); err != nil {
			t.Error(err)
		}
	}
	if len(rep.Legend) != 4 {
		t.Fatalf("legend %v, want 4 classes", rep.Legend)
	}
	pal := readPNG(t, filepath.Join(out, rep.Outputs[0].Mask)).(*image.Paletted).Palette
	for k, e := range rep.Legend {
		r, g, bl, _ := pal[k].RGBA()
		if want := fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, bl>>8); e.Class != k || e.Color != want {
			t.Errorf("legend entry %d: %+v, the mask palette has %s", k, e, want)
		}
	}
	if l := readPNG(t, filepath.Join(out, "legend.png")); l.Bounds().Dy() < 4*14 {
		t.Errorf("legend.png is %v", l.Bounds())
	}
}

// TestPredictRefusesImagesTooLarge: an image whose batch cannot fit the
// pool's capacity, or the host's available memory, is refused before it is
// decoded, naming the file, its size, the need and a size that fits;
// nothing is written for it.
func TestPredictRefusesImagesTooLarge(t *testing.T) {
	runDir, _ := trainTiny(t)
	in := t.TempDir()
	big := image.NewRGBA(image.Rect(0, 0, 512, 384))
	for i := range big.Pix {
		big.Pix[i] = uint8(i * 7)
	}
	f, err := os.Create(filepath.Join(in, "big.png"))
	if err != nil {
		t.Fatal(err)
	}
	png.Encode(f, big)
	f.Close()

	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	// 4 MiB: two of the pool's 2 MiB pages, the model's and a small image's.
	code := run([]string{"predict", "--checkpoint", runDir, "--input", in, "--out", out, "--capacity", "4MiB", "--tile", "none"}, &stdout, &stderr)
	msg := stderr.String()
	for _, want := range []string{"big.png is 384x512 (height x width)", "the model takes it at 384x512", "above its capacity 4.00 MiB", "Scale it down to"} {
		if !strings.Contains(msg, want) {
			t.Errorf("exit %d; stderr lacks %q: %s", code, want, msg)
		}
	}
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(out, "big.png")); err == nil {
		t.Error("a mask was written for the refused image")
	}

}

// TestResumeAfterDataChange: train --resume refuses a dataset that changed
// since the checkpoint, naming what changed, and continues with
// --allow-data-change.
func TestResumeAfterDataChange(t *testing.T) {
	ds := filepath.Join(t.TempDir(), "shapes")
	runOK(t, "data", "synth", "--out", ds, "--count", "12", "--size", "16")
	runDir, _ := trainTiny(t, "--set", "data.source=folder", "--set", "data.path="+ds)
	for _, sub := range []string{"images", "masks"} {
		if err := os.Remove(filepath.Join(ds, sub, "00007.png")); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"train", "--resume", "auto", "--out", runDir, "--set", "train.steps=6"}
	if code := run(args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "samples: 12, now 11") ||
		!strings.Contains(stderr.String(), "--allow-data-change") {
		t.Fatalf("resume on changed data: exit %d, %s", code, stderr.String())
	}
	out := runOK(t, append(args, "--allow-data-change")...)
	if !strings.Contains(out, "the data changed since the checkpoint") {
		t.Errorf("allowed resume did not say the data changed: %s", out)
	}
}

// binarySet is a folder dataset of 12 16x16 samples whose masks hold 0
// and 255 (8-bit gray): two classes by their values.
func binarySet(t *testing.T) string {
	t.Helper()
	ds := t.TempDir()
	syn, err := data.NewSynthetic(data.SyntheticConfig{Count: 12, Size: 16, Classes: 2, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(ds, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		img, cls, err := syn.Image(i)
		if err != nil {
			t.Fatal(err)
		}
		m := image.NewGray(cls.Rect)
		for p, c := range cls.Pix {
			m.Pix[p] = c * 255
		}
		for name, pic := range map[string]image.Image{"images": img, "masks": m} {
			f, err := os.Create(filepath.Join(ds, name, fmt.Sprintf("s%02d.png", i)))
			if err != nil {
				t.Fatal(err)
			}
			png.Encode(f, pic)
			f.Close()
		}
	}
	return ds
}

// TestPredictInTheDatasetsMaskValues: a model trained on masks holding 0
// and 255 predicts masks holding 0 and 255 (8-bit gray), for dataset:val
// and for image files; --class-indices writes palette class indices.
func TestPredictInTheDatasetsMaskValues(t *testing.T) {
	ds := binarySet(t)
	runDir, _ := trainTiny(t, "--set", "data.source=folder", "--set", "data.path="+ds, "--set", "model.classes=2")
	values := func(path string) map[uint8]bool {
		t.Helper()
		g, ok := readPNG(t, path).(*image.Gray)
		if !ok {
			t.Fatalf("%s is not 8-bit gray", path)
		}
		seen := map[uint8]bool{}
		for _, v := range g.Pix {
			seen[v] = true
		}
		return seen
	}
	out := t.TempDir()
	runOK(t, "predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", out)
	rep := readReport(t, out)
	if !slices.Equal(rep.MaskValues, []int{0, 255}) || rep.Legend[1].Value == nil || *rep.Legend[1].Value != 255 {
		t.Errorf("report: mask values %v, legend %+v", rep.MaskValues, rep.Legend)
	}
	for _, o := range rep.Outputs {
		for v := range values(filepath.Join(out, o.Mask)) {
			if v != 0 && v != 255 {
				t.Errorf("%s holds %d", o.Mask, v)
			}
		}
	}
	files := t.TempDir()
	runOK(t, "predict", "--checkpoint", runDir, "--input", filepath.Join(ds, "images", "s03.png"), "--out", files)
	for v := range values(filepath.Join(files, "s03.png")) {
		if v != 0 && v != 255 {
			t.Errorf("a file's mask holds %d", v)
		}
	}
	idx := t.TempDir()
	runOK(t, "predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", idx, "--class-indices")
	if _, ok := readPNG(t, filepath.Join(idx, readReport(t, idx).Outputs[0].Mask)).(*image.Paletted); !ok {
		t.Error("--class-indices did not write a palette PNG")
	}
}

// TestPredictProbabilitiesAndTTA: --probs png writes a 16-bit map per class
// that sums to 1 at every pixel (within rounding), at the image's size;
// --probs npy writes one float32 array NumPy reads; --tta reports metrics
// from the flip-averaged probabilities; a bad --probs is a usage error.
func TestPredictProbabilitiesAndTTA(t *testing.T) {
	runDir, _ := trainTiny(t)
	in := t.TempDir()
	syn, _ := data.NewSynthetic(data.SyntheticConfig{Count: 1, Size: 16, Classes: 4, Seed: 2})
	r, _ := data.Resize(syn, 20, 24) // a file of another size than the model's input
	img, _, err := r.(data.ImageSource).Image(0)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(in, "a.png"))
	png.Encode(f, img)
	f.Close()

	out := t.TempDir()
	runOK(t, "predict", "--checkpoint", runDir, "--input", in, "--out", out, "--probs", "png")
	rep := readReport(t, out)
	if len(rep.Outputs) != 1 || len(rep.Outputs[0].Probs) != 4 {
		t.Fatalf("outputs %+v", rep.Outputs)
	}
	var maps []*image.Gray16
	for _, name := range rep.Outputs[0].Probs {
		g, ok := readPNG(t, filepath.Join(out, name)).(*image.Gray16)
		if !ok || g.Bounds().Dx() != 24 || g.Bounds().Dy() != 20 {
			t.Fatalf("%s: %T %v", name, g, g.Bounds())
		}
		maps = append(maps, g)
	}
	mask := readPNG(t, filepath.Join(out, "a.png")).(*image.Paletted)
	for y := range 20 {
		for x := range 24 {
			sum, best, bestV := 0, 0, -1
			for k, g := range maps {
				v := int(g.Gray16At(x, y).Y)
				sum += v
				if v > bestV {
					best, bestV = k, v
				}
			}
			if sum < 65535-4 || sum > 65535+4 {
				t.Fatalf("pixel (%d,%d): probabilities sum to %d/65535", x, y, sum)
			}
			if got := int(mask.ColorIndexAt(x, y)); got != best && bestV-int(maps[got].Gray16At(x, y).Y) > 2 {
				t.Errorf("pixel (%d,%d): mask %d, most probable %d", x, y, got, best)
			}
		}
	}

	npy := t.TempDir()
	runOK(t, "predict", "--checkpoint", runDir, "--input", in, "--out", npy, "--probs", "npy", "--tta")
	raw, err := os.ReadFile(filepath.Join(npy, "a_probs.npy"))
	if err != nil {
		t.Fatal(err)
	}
	hl := int(binary.LittleEndian.Uint16(raw[8:10]))
	if string(raw[:6]) != "\x93NUMPY" || (10+hl)%64 != 0 || !strings.Contains(string(raw[10:10+hl]), "'shape': (4, 20, 24,)") ||
		len(raw) != 10+hl+4*4*20*24 {
		t.Errorf("a_probs.npy header %q, %d bytes", raw[:10+hl], len(raw))
	}
	if py := torchPython(); py != "" {
		cmd := exec.Command(py, "-c", "import numpy as np, sys; a = np.load(sys.argv[1]); assert a.shape == (4, 20, 24) and a.dtype == np.float32; assert abs(a.sum(0) - 1).max() < 1e-5; print('ok')", filepath.Join(npy, "a_probs.npy"))
		if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "ok") {
			t.Errorf("numpy: %v %s", err, b)
		}
	}

	val := runOK(t, "predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", t.TempDir(), "--tta")
	if !strings.Contains(val, "miou") {
		t.Errorf("--tta on dataset:val: %s", val)
	}
	var o, e bytes.Buffer
	if code := run([]string{"predict", "--checkpoint", runDir, "--input", in, "--probs", "jpg"}, &o, &e); code != 2 {
		t.Errorf("--probs jpg: exit %d, %s", code, e.String())
	}
}

// writeShapes writes synthetic image i as a PNG of h x w (height x width)
// at path.
func writeShapes(t *testing.T, path string, i, h, w int) {
	t.Helper()
	syn, err := data.NewSynthetic(data.SyntheticConfig{Count: i + 1, Size: 16, Classes: 4, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := data.Resize(syn, h, w)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := r.(data.ImageSource).Image(i)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPredictResize: images of another size than training's are named in
// one warning with what --resize offers; --resize train, none and HxW
// size them for the model as asked (masks back at each file's size, no
// warning), as --tile does (no warning), a size the model cannot take is refused naming the multiple,
// and predict.json records every option.
func TestPredictResize(t *testing.T) {
	runDir, _ := trainTiny(t)
	in := t.TempDir()
	writeShapes(t, filepath.Join(in, "a.png"), 0, 16, 16)
	writeShapes(t, filepath.Join(in, "b.png"), 1, 20, 24)
	out := t.TempDir()
	stdout := runOK(t, "predict", "--checkpoint", runDir, "--input", in, "--out", out)
	want := "predict: 1 of 2 images go to the model at another size than training's 16x16 (first: " + filepath.Join(in, "b.png") + ", 20x24, at 20x24)"
	if !strings.Contains(stdout, want) || !strings.Contains(stdout, "--resize train scales every image to 16x16 (as --resize 16x16 does") {
		t.Errorf("no size warning:\n%s", stdout)
	}
	if o := readReport(t, out).Options; o.Resize != "auto" {
		t.Errorf("options %+v", o)
	}
	// Tiles asked for: each file at its full resolution by choice, no note.
	if stdout := runOK(t, "predict", "--checkpoint", runDir, "--input", in, "--out", t.TempDir(), "--tile", "16"); strings.Contains(stdout, "another size") {
		t.Errorf("--tile 16 warned of the size:\n%s", stdout)
	}
	for _, tc := range []struct{ resize, want string }{{"train", "train"}, {"none", "none"}, {"32X48", "32x48"}} {
		out := t.TempDir()
		stdout := runOK(t, "predict", "--checkpoint", runDir, "--input", in, "--out", out, "--resize", tc.resize, "--tta", "--probs", "npy", "--overlay", "--batch", "3")
		if strings.Contains(stdout, "another size") {
			t.Errorf("--resize %s warned:\n%s", tc.resize, stdout)
		}
		rep := readReport(t, out)
		o := rep.Options
		if o.Resize != tc.want || !o.TTA || o.Probs != "npy" || !o.Overlay || o.ClassIndices || rep.Batch != 3 || rep.Device == "" {
			t.Errorf("--resize %s: report options %+v, batch %d, device %q", tc.resize, o, rep.Batch, rep.Device)
		}
		if b := readPNG(t, filepath.Join(out, "b.png")).Bounds(); b.Dx() != 24 || b.Dy() != 20 {
			t.Errorf("--resize %s: b's mask is %v, the file 20x24", tc.resize, b)
		}
	}
	var o, e bytes.Buffer
	if code := run([]string{"predict", "--checkpoint", runDir, "--input", in, "--out", t.TempDir(), "--resize", "30x30"}, &o, &e); code != 1 ||
		!strings.Contains(e.String(), "--resize 30x30") || !strings.Contains(e.String(), "4") {
		t.Errorf("--resize 30x30: exit %d: %s", code, e.String())
	}
	e.Reset()
	if code := run([]string{"predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", t.TempDir(), "--resize", "train"}, &o, &e); code != 1 ||
		!strings.Contains(e.String(), "--resize applies to image files") {
		t.Errorf("--resize with dataset:val: exit %d: %s", code, e.String())
	}
}

// TestPredictIntoAUsedFolder: a second predict into the same default
// folder is refused, leaving the first's files as they were; --force
// replaces the first prediction whole (its overlays gone when the second
// writes none), so the folder never mixes two predictions; a folder
// holding other files is refused even with --force.
func TestPredictIntoAUsedFolder(t *testing.T) {
	runDir, _ := trainTiny(t)
	args := []string{"predict", "--checkpoint", runDir, "--input", "dataset:val"}
	runOK(t, append(args, "--overlay")...)
	outs, _ := filepath.Glob(filepath.Join(runDir, "predict", "val-step-*"))
	if len(outs) != 1 {
		t.Fatalf("prediction folders %v", outs)
	}
	out := outs[0]
	first := readReport(t, out)
	before, _ := os.ReadDir(out)
	var stdout, stderr bytes.Buffer
	// The refusal ends with commands to paste: the same binary and flags,
	// with --force, or into a fresh folder.
	const prog = "go run ./cmd/memunet " // what a test binary reads as
	same := prog + "predict --checkpoint " + runDir + " --input dataset:val --out "
	if code := run(args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), out+" already holds a prediction (predict.json): replace it with "+same+out+" --force, or predict into a new folder with "+same+out+"-2\n") {
		t.Fatalf("second predict: exit %d: %s", code, stderr.String())
	}
	if after, _ := os.ReadDir(out); len(after) != len(before) || !reflect.DeepEqual(readReport(t, out), first) {
		t.Errorf("the refused predict changed %s", out)
	}
	runOK(t, strings.Fields(strings.TrimPrefix(same, prog)+out+" --force")...)
	rep := readReport(t, out)
	entries, _ := os.ReadDir(out)
	listed := map[string]bool{"predict.json": true, "legend.png": true, ".lock": true}
	for _, o := range rep.Outputs {
		listed[o.Mask] = true
		if o.Overlay != "" {
			t.Errorf("overlay in the second prediction: %+v", o)
		}
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("%s holds %s, which its predict.json does not list", out, e.Name())
		}
	}
	os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644)
	stderr.Reset()
	if code := run(append(args, "--force"), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "also holds 1 others (e.g. notes.txt): choose another --out, e.g. "+same+out+"-2\n") {
		t.Errorf("--force over a foreign file: exit %d: %s", code, stderr.String())
	}
}

// TestPredictTTASaysWhyItDiffers: dataset:val with --tta prints its mIoU
// beside training's and says why the two differ; predict.json records it.
func TestPredictTTASaysWhyItDiffers(t *testing.T) {
	runDir, _ := trainTiny(t)
	out := t.TempDir()
	stdout := runOK(t, "predict", "--checkpoint", runDir, "--newest", "--input", "dataset:val", "--out", out, "--tta")
	if !strings.Contains(stdout, "(training's val miou at step 4: ") || !strings.Contains(stdout, "; they differ as --tta averages each image's probabilities with its mirror's, which training's validation does not)") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if rep := readReport(t, out); !strings.Contains(rep.UnlikeTraining, "--tta") || !rep.Options.TTA {
		t.Errorf("report: %q, %+v", rep.UnlikeTraining, rep.Options)
	}
	out = t.TempDir()
	if stdout := runOK(t, "predict", "--checkpoint", runDir, "--newest", "--input", "dataset:val", "--out", out); strings.Contains(stdout, "differ") {
		t.Errorf("without --tta:\n%s", stdout)
	}
}

// TestClassNames: data.class_names names the classes in training's,
// predict's and eval's per-class tables, in predict.json's legend and in
// legend.png (wider for the names).
func TestClassNames(t *testing.T) {
	names := []string{"background", "circle", "rectangle", "triangle"}
	runDir, _ := trainTiny(t, "--set", "data.class_names=["+strings.Join(names, ", ")+"]")
	out := t.TempDir()
	stdout := runOK(t, "predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", out)
	rep := readReport(t, out)
	for k, name := range names {
		if rep.Legend[k].Name != name || rep.Metrics.PerClass[k].Name != name {
			t.Errorf("class %d: legend %+v, scores %+v", k, rep.Legend[k], rep.Metrics.PerClass[k])
		}
	}
	if !regexp.MustCompile(`(?m)^2\s+rectangle\s+`).MatchString(stdout) {
		t.Errorf("predict's table lacks the names:\n%s", stdout)
	}
	plainRun, _ := trainTiny(t)
	plain := t.TempDir()
	runOK(t, "predict", "--checkpoint", plainRun, "--input", "dataset:val", "--out", plain)
	if named, unnamed := readPNG(t, filepath.Join(out, "legend.png")).Bounds(), readPNG(t, filepath.Join(plain, "legend.png")).Bounds(); named.Dx() <= unnamed.Dx() {
		t.Errorf("legend.png with names %v, without %v", named, unnamed)
	}
	if e := runOK(t, "eval", "--checkpoint", runDir, "--out", filepath.Join(t.TempDir(), "e.json")); !regexp.MustCompile(`(?m)^3\s+triangle\s+`).MatchString(e) {
		t.Errorf("eval's table lacks the names:\n%s", e)
	}
	var o, e bytes.Buffer
	if code := run(append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", t.TempDir(), "--set", "data.class_names=[a, b]"}, tinyArgs...), &o, &e); code != 2 && code != 1 ||
		!strings.Contains(e.String(), "data.class_names: 2 names but model.classes is 4") {
		t.Errorf("two names for four classes: exit %d: %s", code, e.String())
	}
}

// TestExportDataMetadata: the exported file's metadata holds what a
// PyTorch user needs to prepare images and read the outputs: each
// channel's mean and std, training's input size, the training masks'
// value of each class and the class names.
func TestExportDataMetadata(t *testing.T) {
	runDir, _ := trainTiny(t, "--set", "data.source=folder", "--set", "data.path="+binarySet(t), "--set", "model.classes=2",
		"--set", "data.mean=[0.4, 0.5, 0.6]", "--set", "data.std=[0.2]", "--set", "data.class_names=[sky, road]")
	out := filepath.Join(t.TempDir(), "model.safetensors")
	runOK(t, "export", "--checkpoint", runDir, "--out", out)
	f, err := safetensors.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var pre struct {
		Channels  int       `json:"channels"`
		Mean      []float64 `json:"mean"`
		Std       []float64 `json:"std"`
		InputSize []int     `json:"input_size"`
	}
	var values []int
	var names []string
	for key, dst := range map[string]any{"memunet_preprocessing": &pre, "memunet_mask_values": &values, "memunet_class_names": &names} {
		if err := json.Unmarshal([]byte(f.Metadata[key]), dst); err != nil {
			t.Errorf("%s: %q: %v", key, f.Metadata[key], err)
		}
	}
	if pre.Channels != 3 || !slices.Equal(pre.Mean, []float64{0.4, 0.5, 0.6}) || !slices.Equal(pre.Std, []float64{0.2, 0.2, 0.2}) ||
		!slices.Equal(pre.InputSize, []int{16, 16}) {
		t.Errorf("memunet_preprocessing %s", f.Metadata["memunet_preprocessing"])
	}
	if !slices.Equal(values, []int{0, 255}) || !slices.Equal(names, []string{"sky", "road"}) {
		t.Errorf("mask values %v, class names %v", values, names)
	}
}

// TestPredictAfterAKilledWrite: a temporary file outdir.WriteFile left
// (a predict killed mid-write) neither makes an empty --out used nor
// stops --force replacing an earlier prediction; it is removed.
func TestPredictAfterAKilledWrite(t *testing.T) {
	runDir, _ := trainTiny(t)
	for _, tc := range []struct {
		name    string
		earlier bool
	}{{"empty", false}, {"earlier prediction", true}} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := []string{"predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", out}
			if tc.earlier {
				runOK(t, args...)
				args = append(args, "--force")
			}
			leftover := filepath.Join(out, ".val-00000.png.tmp-123456")
			if err := os.WriteFile(leftover, []byte("half a png"), 0o600); err != nil {
				t.Fatal(err)
			}
			runOK(t, args...)
			if _, err := os.Stat(leftover); !os.IsNotExist(err) {
				t.Errorf("the leftover %s is still there (%v)", leftover, err)
			}
		})
	}
}
