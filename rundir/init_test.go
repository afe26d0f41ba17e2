package rundir

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/safetensors"
	"github.com/memunet/memunet/train"
)

// params reads every parameter of the trainer's model by name.
func params(tr *train.Trainer) map[string][]float32 {
	out := map[string][]float32{}
	for _, p := range tr.Net.Params() {
		out[p.Name] = p.Read()
	}
	return out
}

// TestInitFromRunAndFile: train.init starts a new run from another run's
// best weights, or from a safetensors file (fp16 too), before its first
// step; a different head is refused naming its tensors unless
// train.init_skip leaves it at its initialization; a resumed run keeps its
// own weights.
func TestInitFromRunAndFile(t *testing.T) {
	base := resumeConfig("fp32")
	base.Train.Steps = 4
	from := t.TempDir()
	sum := mustRun(t, context.Background(), base, Options{OutDir: from}, nil)
	best := openCk(t, sum.BestCheckpoint)
	want := map[string][]float32{}
	for _, tn := range best.Model.Tensors {
		if tn.DType == safetensors.F32 {
			v := make([]float32, tn.Numel())
			if err := tn.Float32(v); err != nil {
				t.Fatal(err)
			}
			want[tn.Name] = v
		}
	}
	var got map[string][]float32
	capture := func(tr *train.Trainer) { got = params(tr) }

	cfg := base
	cfg.Train.Init = from
	cfg.Output.Progress = "plain"
	var log bytes.Buffer
	mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir(), Progress: &log}, capture)
	for name, w := range want {
		if !slices.Equal(got[name], w) {
			t.Errorf("init from the run: %s differs from its best checkpoint's", name)
		}
	}
	if !strings.Contains(log.String(), "train.init: ") || !strings.Contains(log.String(), sum.BestCheckpoint) {
		t.Errorf("no init note: %s", log.String())
	}

	// A safetensors file in fp16: the values rounded to fp16.
	file := filepath.Join(t.TempDir(), "w.safetensors")
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, exportTensors(t, best), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Init = file
	mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir()}, capture)
	for name, w := range want {
		for i := range w {
			if d := got[name][i] - w[i]; d > 1e-3*(1+abs32(w[i])) || -d > 1e-3*(1+abs32(w[i])) {
				t.Fatalf("init from fp16 %s[%d]: %v, want about %v", name, i, got[name][i], w[i])
			}
		}
	}

	// Another head: refused, then skipped.
	head := base
	head.Model.Classes, head.Train.Init = 3, from
	_, err := Run(context.Background(), head, Options{OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "outc.conv.weight") || !strings.Contains(err.Error(), "train.init_skip") {
		t.Fatalf("another head: %v", err)
	}
	head.Train.InitSkip = []string{"outc"}
	mustRun(t, context.Background(), head, Options{OutDir: t.TempDir()}, capture)
	fresh := head
	fresh.Train.Init, fresh.Train.InitSkip = "", nil
	var plain map[string][]float32
	mustRun(t, context.Background(), fresh, Options{OutDir: t.TempDir()}, func(tr *train.Trainer) { plain = params(tr) })
	for name := range got {
		if strings.HasPrefix(name, "outc") {
			if !slices.Equal(got[name], plain[name]) {
				t.Errorf("%s is not at its initialization", name)
			}
		} else if !slices.Equal(got[name], want[name]) {
			t.Errorf("%s was not loaded", name)
		}
	}

	// A missing file is named.
	cfg.Train.Init = filepath.Join(t.TempDir(), "none.safetensors")
	if _, err := Run(context.Background(), cfg, Options{OutDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "none.safetensors does not exist") {
		t.Errorf("a missing init: %v", err)
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// exportTensors is a checkpoint's model tensors, floats as fp16.
func exportTensors(t *testing.T, ck *checkpoint.Checkpoint) []safetensors.Tensor {
	t.Helper()
	var out []safetensors.Tensor
	for _, tn := range ck.Model.Tensors {
		if tn.DType != safetensors.F32 {
			out = append(out, tn)
			continue
		}
		v := make([]float32, tn.Numel())
		if err := tn.Float32(v); err != nil {
			t.Fatal(err)
		}
		h := safetensors.Tensor{Name: tn.Name, DType: safetensors.F16, Shape: tn.Shape, Data: make([]byte, 2*len(v))}
		for i, x := range v {
			binary.LittleEndian.PutUint16(h.Data[2*i:], backend.F32ToF16(x))
		}
		out = append(out, h)
	}
	return out
}

// TestFreeze: train.freeze: [encoder] leaves inc and the down blocks as
// they started while the decoder learns, and Adam keeps no state for them
// (the plan's optimizer bytes shrink); an unknown prefix names the blocks.
func TestFreeze(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.Freeze = 3, []string{"encoder"}
	var start map[string][]float32
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir()}, func(tr *train.Trainer) { start = params(tr) })
	end := openCk(t, sum.LastCheckpoint)
	changed := func(name string) bool {
		tn, _ := end.Model.Get(name)
		v := make([]float32, tn.Numel())
		tn.Float32(v)
		return !slices.Equal(v, start[name])
	}
	for name := range start {
		frozen := strings.HasPrefix(name, "inc.") || strings.HasPrefix(name, "down")
		if strings.Contains(name, "running_") {
			continue // BatchNorm's statistics still follow the data
		}
		if frozen && changed(name) {
			t.Errorf("frozen %s changed", name)
		}
		if !frozen && strings.HasSuffix(name, "weight") && !changed(name) {
			t.Errorf("%s did not learn", name)
		}
	}
	open := cfg
	open.Train.Freeze = nil
	a, err := train.PlanConfig(open)
	if err != nil {
		t.Fatal(err)
	}
	b, err := train.PlanConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b.PeakByCategory["optimizer"] >= a.PeakByCategory["optimizer"] {
		t.Errorf("optimizer bytes %d frozen, %d not", b.PeakByCategory["optimizer"], a.PeakByCategory["optimizer"])
	}
	cfg.Train.Freeze = []string{"encodr"}
	if _, err := Run(context.Background(), cfg, Options{OutDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), `"encodr" names no parameter`) || !strings.Contains(err.Error(), "inc, down1") {
		t.Errorf("an unknown prefix: %v", err)
	}
}
