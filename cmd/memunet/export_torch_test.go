package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// torchPython is a python3 that imports torch, or "".
func torchPython() string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import torch, numpy").Run() == nil {
			return py
		}
	}
	return ""
}

func writeF32(t *testing.T, path string, v []float32) {
	t.Helper()
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExportLoadsInPyTorch: the exported file loads with strict=True into
// tools/pytorch/memunet_torch.py's UNet (docs/guide/export.md's module), and PyTorch's logits
// equal memunet's, for both upsampling modes and all three norms. Skipped
// where python3 has no torch (Debian: apt-get install python3-torch).
func TestExportLoadsInPyTorch(t *testing.T) {
	py := torchPython()
	if py == "" {
		t.Skip("no python3 with torch and numpy")
	}
	for _, arch := range [][2]string{{"bilinear", "batch"}, {"transpose", "group"}, {"transpose", "none"}} {
		t.Run(arch[0]+"-"+arch[1], func(t *testing.T) {
			runDir, sum := trainTiny(t, "--set", "model.up="+arch[0], "--set", "model.norm="+arch[1], "--set", "model.groups=2")
			tmp := t.TempDir()
			out := filepath.Join(tmp, "model.safetensors")
			runOK(t, "export", "--checkpoint", runDir, "--out", out)

			ck, err := checkpoint.Open(sum.LastCheckpoint)
			if err != nil {
				t.Fatal(err)
			}
			dev := model.NewDevice(cpu.New(), memory.Options{})
			net, err := model.New(dev, ck.Config.ModelConfig(), 1)
			if err != nil {
				t.Fatal(err)
			}
			defer net.Free()
			if err := ck.LoadWeights(net); err != nil {
				t.Fatal(err)
			}
			syn, _ := data.NewSynthetic(data.SyntheticConfig{Count: 3, Size: 16, Classes: 4, Seed: 5})
			x, _ := model.NewTensor(dev, memory.Activations, backend.Float32, 3, 3, 16, 16)
			defer x.Release()
			images := make([]float32, x.Len())
			if err := data.FillBatch(syn, []int{0, 1, 2}, images, make([]uint8, 3*256)); err != nil {
				t.Fatal(err)
			}
			x.Write(images)
			logits, err := net.Forward(&model.Env{Device: dev}, x)
			if err != nil {
				t.Fatal(err)
			}
			writeF32(t, filepath.Join(tmp, "x.bin"), images)
			writeF32(t, filepath.Join(tmp, "logits.bin"), logits.Read())
			logits.Release()

			cmd := exec.Command(py, "../../tools/pytorch/memunet_torch.py", out, "--check", filepath.Join(tmp, "x.bin"), filepath.Join(tmp, "logits.bin"), "3", "16", "16")
			res, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("%v: %s", err, stderr)
			}
			var r struct {
				MaxAbsDiff  float64 `json:"max_abs_diff"`
				MaxAbs      float64 `json:"max_abs"`
				ArgmaxAgree float64 `json:"argmax_agree"`
				Torch       string  `json:"torch"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				t.Fatalf("%v: %s", err, res)
			}
			t.Logf("torch %s: max |logit difference| %.3g of max |logit| %.3g; argmax agrees on %.4f of pixels", r.Torch, r.MaxAbsDiff, r.MaxAbs, r.ArgmaxAgree)
			if r.MaxAbsDiff > 1e-4*max(1, r.MaxAbs) || r.ArgmaxAgree < 0.999 {
				t.Errorf("PyTorch's logits differ: %+v", r)
			}
		})
	}
}

// TestDocsPythonSnippet: docs/guide/export.md's Python snippet for
// exported weights runs as written (from the repository root, on an export of the
// default name) with the python3 that has torch, e.g. Debian's
// python3-torch without the safetensors package.
func TestDocsPythonSnippet(t *testing.T) {
	py := torchPython()
	if py == "" {
		t.Skip("no python3 with torch and numpy")
	}
	page, err := os.ReadFile("../../docs/guide/export.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	start := strings.Index(text, "```python\n")
	if start < 0 {
		t.Fatal("docs/guide/export.md has no ```python block")
	}
	code := text[start+len("```python\n"):]
	code = code[:strings.Index(code, "```")]
	const example = "runs/q/model-step-00000800.safetensors"
	if !strings.Contains(code, example) {
		t.Fatalf("the snippet does not load %s:\n%s", example, code)
	}
	runDir, _ := trainTiny(t)
	out := runOK(t, "export", "--checkpoint", runDir)
	matches, _ := filepath.Glob(filepath.Join(runDir, "model-step-*.safetensors"))
	if len(matches) != 1 {
		t.Fatalf("export wrote %v (%s)", matches, out)
	}
	code = strings.ReplaceAll(code, example, matches[0])
	code += "\nassert not model.training and 'memunet_model' in meta and len(state) > 0\nprint('ok')\n"
	cmd := exec.Command(py, "-c", code)
	cmd.Dir = "../.."
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(b)), "ok") {
		t.Fatalf("the docs/guide/export.md snippet: %v\n%s\n%s", err, code, b)
	}
}
