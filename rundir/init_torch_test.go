package rundir

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memunet/memunet/safetensors"
	"github.com/memunet/memunet/train"
)

// TestInitFromPyTorch: a state_dict PyTorch wrote (tools/pytorch/memunet_torch.py's
// UNet, its own random initialization, saved with its save_file) starts a
// memunet run: every tensor loads by its PyTorch name, strictly. Skipped
// where python3 has no torch.
func TestInitFromPyTorch(t *testing.T) {
	py := ""
	for _, c := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(c, "-c", "import torch, numpy").Run() == nil {
			py = c
			break
		}
	}
	if py == "" {
		t.Skip("no python3 with torch")
	}
	cfg := resumeConfig("fp32")
	cfg.Train.Steps = 1
	file := filepath.Join(t.TempDir(), "torch.safetensors")
	script := `import sys, torch; sys.path.insert(0, sys.argv[1]); from memunet_torch import UNet, save_file
torch.manual_seed(7)
m = UNet(in_channels=3, classes=4, base=4, depth=2, up="bilinear", norm="batch", groups=8)
with torch.no_grad():
    for name, b in m.named_buffers():
        if "running" in name: b.uniform_(0.5, 1.5)
save_file(m.state_dict(), sys.argv[2])`
	if out, err := exec.Command(py, "-c", script, "../tools/pytorch", file).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Train.Init = file
	var got map[string][]float32
	mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir()}, func(tr *train.Trainer) { got = params(tr) })
	n := 0
	for _, tn := range f.Tensors {
		if tn.DType != safetensors.F32 {
			continue
		}
		want := make([]float32, tn.Numel())
		if err := tn.Float32(want); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[tn.Name], want) {
			t.Errorf("%s differs from PyTorch's", tn.Name)
		}
		n++
	}
	if n != len(got) {
		t.Errorf("%d PyTorch float tensors, %d memunet parameters and buffers", n, len(got))
	}
}
