package train

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/optim"
	"github.com/memunet/memunet/safetensors"
)

// stateTol bounds an optimizer state tensor's error relative to its
// largest entry. Adam's and SGD's states agree to 6e-7 of it. RMSprop's
// momentum buffer starts at g/sqrt((1-alpha)g²) = ±10 for every entry, so
// a gradient that is 1e-4 of its tensor's largest (float32 sums leave it
// 1e-3 relative error) enters as loudly as the largest, and its rounding
// shows in the buffer: PyTorch's own float32 and float64 runs of this case
// differ by 9.6e-4 of the scale, memunet and PyTorch by 1.4e-3. A wrong
// formula (alpha for 1-alpha, eps inside the root, no momentum) is O(0.1).
const stateTol = 5e-3

// stateClose checks |got-want| <= stateTol*(1+max|want|) and returns the
// worst ratio.
func stateClose(t *testing.T, what string, got, want []float32) float64 {
	t.Helper()
	scale := 1.0
	for _, w := range want {
		scale = max(scale, 1+math.Abs(float64(w)))
	}
	worst := 0.0
	for i := range got {
		e := math.Abs(float64(got[i])-float64(want[i])) / scale
		if !(e <= stateTol) {
			t.Fatalf("%s[%d] = %.9g, PyTorch %.9g (|diff| = %.3g of the tensor's scale %.3g, above %.3g)", what, i, got[i], want[i], e, scale, stateTol)
		}
		worst = max(worst, e)
	}
	return worst
}

// TestOptimizersMatchPyTorch runs every optimizer for four steps of the
// tiny batch-norm UNet from its golden start, with a different learning
// rate each step, and holds the state_dict, the optimizer's state tensors
// and each step's loss to torch.optim's (testdata/optim, made by
// tools/goldens/make_optim_goldens.py). Worst seen |diff|/(1+|torch|) for the
// weights: 2e-7 with SGD, 2.3e-5 with Adam and RMSprop, whose g/sqrt(v)
// magnifies the gradients' relative differences as in TestPyTorchGoldens.
func TestOptimizersMatchPyTorch(t *testing.T) {
	read := func(path string) *safetensors.File {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return f
	}
	traj := read(filepath.Join("..", "testdata", "optim", "trajectories.safetensors"))
	start := read(filepath.Join("..", traj.Metadata["source"]))
	var cases []struct {
		Name      string
		Optimizer string
		Kwargs    struct {
			Betas       []float64 `json:"betas"`
			Eps         float64   `json:"eps"`
			WeightDecay float64   `json:"weight_decay"`
			Momentum    float64   `json:"momentum"`
			Dampening   float64   `json:"dampening"`
			Nesterov    bool      `json:"nesterov"`
			Alpha       float64   `json:"alpha"`
		}
		LRs []float64
	}
	if err := json.Unmarshal([]byte(traj.Metadata["cases"]), &cases); err != nil {
		t.Fatalf("cases metadata: %v", err)
	}
	seen := map[optim.Kind]bool{}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			k := c.Kwargs
			oc := optim.Config{Kind: optim.Kind(c.Optimizer), LR: c.LRs[0], WeightDecay: k.WeightDecay, Eps: k.Eps,
				Momentum: k.Momentum, Dampening: k.Dampening, Nesterov: k.Nesterov, Alpha: k.Alpha}
			if len(k.Betas) == 2 {
				oc.Beta1, oc.Beta2 = k.Betas[0], k.Betas[1]
			}
			run := newGoldenRun(t, start, goldenArch(t, start))
			opt, err := optim.New(run.dev, run.net.Params(), oc)
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Free()
			seen[oc.Kind] = true
			worst := map[string]float64{}
			lossesWant := goldenF32(t, traj, c.Name+".loss")
			for i, lr := range c.LRs {
				l := run.step(nil)
				worst["loss"] = max(worst["loss"], goldenClose(t, fmt.Sprintf("%s.loss[%d]", c.Name, i), []float32{float32(l)}, lossesWant[i:i+1], goldenTolForward))
				opt.Update(lr, 0)
			}
			if opt.Steps() != int64(len(c.LRs)) {
				t.Errorf("%d steps counted, want %d", opt.Steps(), len(c.LRs))
			}
			for _, p := range run.net.Params() {
				worst["weights"] = max(worst["weights"], goldenClose(t, c.Name+"."+p.Name, p.Read(), goldenF32(t, traj, c.Name+"."+p.Name), goldenTolAdam))
			}
			// Every state tensor PyTorch keeps, and no other.
			want := map[string]bool{}
			for _, tn := range traj.Tensors {
				if rest, ok := strings.CutPrefix(tn.Name, c.Name+".state."); ok {
					want[rest] = true
				}
			}
			for _, st := range opt.State() {
				name := st.Param.Name + "." + st.Name
				if !want[name] {
					t.Errorf("state %s: PyTorch keeps no such tensor", name)
					continue
				}
				delete(want, name)
				got := backend.DownloadFloat32(run.dev.Backend, st.View)
				worst["state"] = max(worst["state"], stateClose(t, c.Name+".state."+name, got, goldenF32(t, traj, c.Name+".state."+name)))
			}
			for name := range want {
				t.Errorf("state %s: PyTorch keeps it, memunet does not", name)
			}
			t.Logf("worst |diff|/(1+|torch|): %v", worst)
		})
	}
	for _, k := range optim.Kinds() {
		if !seen[k] {
			t.Errorf("no PyTorch trajectory checks %s", k)
		}
	}
}
