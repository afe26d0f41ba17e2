package optim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/safetensors"
)

// clipTol bounds the relative difference from PyTorch of the norm and of
// every clipped gradient value: memunet sums the squares in float64,
// PyTorch in float32 per tensor, so the norms differ by a few float32
// ulps at most, and the factor and each product with it by as much.
const clipTol = 1e-6

// TestClipGradNormMatchesPyTorch holds ClipGradNorm to
// torch.nn.utils.clip_grad_norm_ on the same gradients
// (testdata/clip/clip_grad_norm.safetensors, made by
// tools/goldens/make_clip_goldens.py): the norm it returns and every
// gradient after it, each within clipTol relative; gradients it leaves
// alone (the factor clamped to 1) bit for bit.
func TestClipGradNormMatchesPyTorch(t *testing.T) {
	raw, err := os.ReadFile("../testdata/clip/clip_grad_norm.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string  `json:"name"`
		MaxNorm float64 `json:"max_norm"`
		Count   int     `json:"count"`
	}
	if err := json.Unmarshal([]byte(f.Metadata["cases"]), &cases); err != nil {
		t.Fatalf("cases metadata: %v", err)
	}
	if len(cases) < 6 {
		t.Fatalf("%d cases", len(cases))
	}
	read := func(name string) []float32 {
		tn, ok := f.Get(name)
		if !ok {
			t.Fatalf("the golden file has no %s", name)
		}
		v := make([]float32, tn.Numel())
		if err := tn.Float32(v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	dev := model.NewDevice(cpu.New(), memory.Options{})
	worst := 0.0
	for _, c := range cases {
		var grads []backend.View
		for i := range c.Count {
			g := read(fmt.Sprintf("%s.grad.%d", c.Name, i))
			buf, err := dev.Pool.Alloc(memory.Grads, int64(4*len(g)))
			if err != nil {
				t.Fatal(err)
			}
			v := backend.Whole(buf, backend.Float32)
			backend.UploadFloat32(dev.Backend, v, g)
			grads = append(grads, v)
		}
		norm := ClipGradNorm(dev.Backend, grads, c.MaxNorm)
		want := float64(read(c.Name + ".norm")[0])
		if e := relErr(norm, want); !(e <= clipTol) {
			t.Errorf("%s: norm %.9g, PyTorch %.9g", c.Name, norm, want)
		} else {
			worst = max(worst, e)
		}
		for i, v := range grads {
			got, want := backend.DownloadFloat32(dev.Backend, v), read(fmt.Sprintf("%s.clipped.%d", c.Name, i))
			same := ClipCoef(norm, c.MaxNorm) == 1
			for j := range got {
				e := relErr(float64(got[j]), float64(want[j]))
				if same && got[j] != want[j] || !(e <= clipTol) {
					t.Fatalf("%s: gradient %d[%d] = %.9g, PyTorch %.9g", c.Name, i, j, got[j], want[j])
				}
				worst = max(worst, e)
			}
			dev.Pool.MustFree(v.Buf)
		}
	}
	t.Logf("worst relative difference from PyTorch: %.3g", worst)
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Abs(want)
}

// TestClipCoef: the factor is max/(norm+1e-6) clamped to 1, in float32
// steps as PyTorch forms it; an infinite norm gives 0, a NaN stays NaN,
// and a finite norm beyond float32's range a factor rounded once.
func TestClipCoef(t *testing.T) {
	for _, tc := range []struct {
		norm, max float64
		want      float32
	}{
		{0, 12, 1},
		{12, 12, float32(1 / float32(12+float32(1e-6)) * 12)},
		{30, 12, float32(float32(1/float32(30+float32(1e-6))) * 12)},
		{math.Inf(1), 12, 0},
		{1e300, 12, float32(12 / 1e300)},
	} {
		if got := ClipCoef(tc.norm, tc.max); got != tc.want {
			t.Errorf("ClipCoef(%g, %g) = %v, want %v", tc.norm, tc.max, got, tc.want)
		}
	}
	if got := ClipCoef(math.NaN(), 12); !math.IsNaN(float64(got)) {
		t.Errorf("ClipCoef(NaN, 12) = %v, want NaN", got)
	}
	if got := ClipCoef(12, 12); !(got < 1) {
		t.Errorf("a norm equal to the max: factor %v, want just below 1 (PyTorch's eps)", got)
	}
}
