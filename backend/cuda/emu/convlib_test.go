//go:build cudaemu

package emu_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/backendtest"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
	"github.com/memunet/memunet/backend/cuda/emu"
	"github.com/memunet/memunet/train"
)

// deterministic is the default policy: cuda.workspace's 256 MiB,
// deterministic algorithms only.
var deterministic = cudnn.Policy{WorkspaceBytes: 256 << 20, Deterministic: true}

// libraryBackend is an emulated device whose convolutions the stand-in
// cuDNN computes under policy (required: cuda.conv cudnn).
func libraryBackend(t *testing.T, policy cudnn.Policy, required bool) (*cuda.Backend, *emu.ConvLibrary) {
	t.Helper()
	d := emu.New(1 << 30)
	b, err := cuda.New(d)
	if err != nil {
		t.Fatal(err)
	}
	lib := emu.NewConvLibrary(d)
	b.UseConvLibrary(lib, policy, required)
	return b, lib
}

// checkRanOnly fails unless lib ran, for each pass, only the algorithm
// want names (by pass), and ran it.
func checkRanOnly(t *testing.T, lib *emu.ConvLibrary, want [3]int) {
	t.Helper()
	for p := cudnn.Forward; p <= cudnn.BackwardFilter; p++ {
		runs := lib.Runs(p)
		if runs[want[p]] == 0 || len(runs) != 1 {
			t.Errorf("%s: the library ran %v (algorithm: times), want only %s (%d)", p, runs, cudnn.AlgoName(p, want[p]), want[p])
		}
	}
}

// TestConformanceWithConvLibrary: the backend conformance suite with the
// convolutions, 2D and 3D, computed by a library (the stand-in cuDNN): forward,
// both gradients, the transposed convolution, bias, accumulation into the
// fp32 weight gradient, 16-bit gradients staged in the workspace, all at
// the suite's tolerances. Under the default policy the library ran only
// the fastest deterministic algorithm of each pass that fits.
func TestConformanceWithConvLibrary(t *testing.T) {
	b, lib := libraryBackend(t, deterministic, true)
	backendtest.Run(t, b)
	// Fastest deterministic: WINOGRAD_NONFUSED forward, backward data and
	// backward filter (ALGO_0 and ALGO_3 are faster, but atomic).
	checkRanOnly(t, lib, [3]int{7, 5, 5})
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, c := range b.ConvChoices() {
		if c.Fallback != "" {
			t.Errorf("%s: memunet's kernels computed it: %s", c.Shape, c.Fallback)
		}
	}
}

// TestConvLibraryWorkspaceBudget: with cuda.workspace 0 the policy takes
// the algorithms that need none (IMPLICIT_GEMM, ALGO_1, ALGO_1), and the
// backend asks the pool for no workspace but a 16-bit weight gradient's
// staging.
func TestConvLibraryWorkspaceBudget(t *testing.T) {
	b, lib := libraryBackend(t, cudnn.Policy{Deterministic: true}, true)
	s := backend.ConvShape{N: 2, C: 3, H: 7, W: 5, OC: 4, K: 3, Pad: 1, DT: backend.Float32}
	if n := b.ConvWorkspace(s); n != 0 {
		t.Errorf("ConvWorkspace(%+v) = %d floats, want 0", s, n)
	}
	s.DT = backend.Float16
	if n, want := b.ConvWorkspace(s), (2*s.WeightSize()+3)/4; n != want {
		t.Errorf("ConvWorkspace(%+v) = %d floats, want the staged fp16 weight gradient's %d", s, n, want)
	}
	cfg, err := train.DeriveVariant(tinyConfig(), "baseline")
	if err != nil {
		t.Fatal(err)
	}
	tr := trainerOn(t, cfg, b)
	if _, err := tr.Step(); err != nil {
		t.Fatal(err)
	}
	checkRanOnly(t, lib, [3]int{0, 1, 1})
}

// TestConvLibraryFindsOnce: each shape's passes are found once a
// process: another policy (the next trainer's, or the run after its plan)
// chooses again from the same results, so a plan and its run choose
// alike.
func TestConvLibraryFindsOnce(t *testing.T) {
	b, lib := libraryBackend(t, deterministic, true)
	s := backend.ConvShape{N: 2, C: 3, H: 7, W: 5, OC: 4, K: 3, Pad: 1, DT: backend.Float32}
	if n := b.ConvWorkspace(s); n == 0 || lib.Finds() != 3 {
		t.Fatalf("ConvWorkspace %d floats after %d Finds; want the Winograd workspace after 3", n, lib.Finds())
	}
	b.UseConvLibrary(lib, deterministic, true)
	b.ConvWorkspace(s)
	b.UseConvLibrary(lib, cudnn.Policy{Deterministic: true}, true)
	if n := b.ConvWorkspace(s); n != 0 || lib.Finds() != 3 {
		t.Errorf("with cuda.workspace 0: ConvWorkspace %d floats after %d Finds; want 0 after the same 3", n, lib.Finds())
	}
}

// TestConvLibraryCountsWhatItLoads: what a library keeps on the device
// once it has loaded an algorithm's kernels (at Find, or, where Find's
// results came from the cache, at the algorithm's first run) is counted
// in the context's overhead, so the device's used bytes less the context
// are the pool's reserved bytes exactly, as the device check holds them.
func TestConvLibraryCountsWhatItLoads(t *testing.T) {
	for _, cached := range []bool{false, true} {
		b, lib := libraryBackend(t, deterministic, true)
		lib.LoadBytes, lib.FromCache = 1<<20, cached
		before := b.ContextOverhead()
		tr, err := train.NewTrainer(tinyConfig(), train.Placement{Backend: b})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := tr.Step(); err != nil {
				t.Fatal(err)
			}
		}
		used, _, err := b.DeviceMemory()
		if err != nil {
			t.Fatal(err)
		}
		reserved := tr.Pool().Stats().Reserved.Current
		if grew := b.ContextOverhead() - before; used-b.ContextOverhead() != reserved || grew < 3<<20 {
			t.Errorf("cached %v: device used %d less the context %d (grown by %d) is %d; the pool holds %d",
				cached, used, b.ContextOverhead(), grew, used-b.ContextOverhead(), reserved)
		}
		tr.Close()
	}
}

// TestConvLibraryExactFP32: with cuda.tf32 false, Find's faster rows
// under the default math type (TF32) are passed over for the FMA ones,
// and each run sets its row's math type: the stand-in refuses an exact
// fp32 run on any other, and a training step runs.
func TestConvLibraryExactFP32(t *testing.T) {
	b, lib := libraryBackend(t, deterministic, true)
	b.SetTF32(false)
	tr := trainerOn(t, tinyConfig(), b)
	if _, err := tr.Step(); err != nil {
		t.Fatal(err)
	}
	checkRanOnly(t, lib, [3]int{7, 5, 5})
	for _, c := range b.ConvChoices() {
		for _, a := range c.Algorithms {
			if c.Precision != "fp32" || a.MathType != cudnn.MathFMA {
				t.Errorf("%s (%s) %s: math type %d", c.Shape, c.Precision, a.Pass, a.MathType)
			}
		}
	}
}

// TestConvLibraryPlanSays: after a plan on a backend whose convolutions
// the library computes, the library's plan (what memunet plan prints below
// its table) names it, the budget, and each convolution the plan's dry run
// asked for, with the algorithms chosen and the workspace they take, which
// the plan's peak holds.
func TestConvLibraryPlanSays(t *testing.T) {
	b, lib := libraryBackend(t, deterministic, true)
	b.SetConvProvider(cuda.ConvProvider{Choice: "cudnn", CUDNN: lib.Name()})
	cfg := tinyConfig()
	row, err := train.PlanConfigOn(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	p := train.LibraryPlanOn(cfg, b)
	if p == nil || p.Library != lib.Name() || p.BudgetBytes != cfg.ConvPolicy().WorkspaceBytes || len(p.Choices) == 0 {
		t.Fatalf("library plan %+v", p)
	}
	var most int64
	for _, c := range p.Choices {
		if c.Fallback != "" || len(c.Algorithms) != 3 || c.WorkspaceBytes <= 0 {
			t.Errorf("choice %+v", c)
		}
		most = max(most, c.WorkspaceBytes)
	}
	if ws := row.PeakByCategory["workspace"]; ws < most {
		t.Errorf("the plan's peak holds %d bytes of workspace; a chosen algorithm takes %d", ws, most)
	}
}

// TestConvLibraryNoFit: where no deterministic algorithm fits the budget,
// cuda.conv cudnn stops the run with an error that names the convolution,
// the workspace it needs and the fix; auto computes that convolution with
// memunet's kernels instead, says why, and trains.
func TestConvLibraryNoFit(t *testing.T) {
	cfg := tinyConfig()
	cfg.Train.Steps = 1
	small := cudnn.Policy{WorkspaceBytes: 1 << 20, Deterministic: true}
	t.Run("cudnn", func(t *testing.T) {
		b, lib := libraryBackend(t, small, true)
		lib.MinWorkspace = 2 << 20
		tr, err := train.NewTrainer(cfg, train.Placement{Backend: b})
		if err == nil {
			_, err = tr.Step()
			tr.Close()
		}
		var nofit *cudnn.NoFitError
		if !errors.As(err, &nofit) {
			t.Fatalf("got %v, want a *cudnn.NoFitError", err)
		}
		for _, want := range []string{"cuda.conv: cudnn", "conv 3x3", "set cuda.workspace to at least 2 (MiB)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if runs := lib.Runs(cudnn.Forward); len(runs) != 0 {
			t.Errorf("the library ran %v before the error", runs)
		}
	})
	t.Run("auto", func(t *testing.T) {
		b, lib := libraryBackend(t, small, false)
		lib.MinWorkspace = 2 << 20
		tr := trainerOn(t, cfg, b)
		if _, err := tr.Step(); err != nil {
			t.Fatal(err)
		}
		choices := b.ConvChoices()
		if len(choices) == 0 {
			t.Fatal("no convolution was asked of the library")
		}
		for _, c := range choices {
			if !strings.Contains(c.Fallback, "no deterministic cuDNN algorithm fits cuda.workspace") {
				t.Errorf("%s: fallback %q", c.Shape, c.Fallback)
			}
		}
		if runs := lib.Runs(cudnn.Forward); len(runs) != 0 {
			t.Errorf("the library ran %v", runs)
		}
	})
}

// TestConvLibraryTraining: training with the library's convolutions loses
// what the CPU loses (within the precision's tolerance), its peak is the
// plan's to the byte (the library's workspace, from the pool, included),
// and two runs of the same seed end with the same weights, in 2D (fp32,
// fp16) and in 3D (transposed convolutions too); with
// cuda.deterministic false the policy takes the faster atomic algorithms,
// whose sums change order from run to run, and the weights differ.
func TestConvLibraryTraining(t *testing.T) {
	weights := func(t *testing.T, variant string, policy cudnn.Policy) []float32 {
		t.Helper()
		base := tinyConfig()
		if variant == "3d" { // 16^3 volumes: 3D convolutions and transposed ones through the library
			variant = "baseline"
			base.Model.Dims, base.Model.Up, base.Data.Count, base.Train.BatchSize = 3, "transpose", 8, 1
		}
		cfg, err := train.DeriveVariant(base, variant)
		if err != nil {
			t.Fatal(err)
		}
		cpu := trainerOn(t, cfg, nil)
		gpu, lib := libraryBackend(t, policy, true)
		tr := trainerOn(t, cfg, gpu)
		peak := tr.Pool().Stats().Allocated.Peak
		for step := 1; step <= cfg.Train.Steps; step++ {
			peak = max(peak, stepBoth(t, step, cpu, tr, lossTol(cfg, gpu)).Peak)
		}
		plan := syncAndPlan(t, cfg, gpu)
		if peak != plan.PeakAllocatedBytes {
			t.Errorf("peak allocated %d with the library, planned %d", peak, plan.PeakAllocatedBytes)
		}
		if len(lib.Runs(cudnn.BackwardFilter)) == 0 {
			t.Error("the library computed no weight gradient")
		}
		var w []float32
		for _, p := range tr.Net.Params() {
			w = append(w, p.Read()...)
		}
		return w
	}
	for _, variant := range []string{"baseline", "fp16", "3d"} {
		t.Run(variant, func(t *testing.T) {
			a, b := weights(t, variant, deterministic), weights(t, variant, deterministic)
			if !slices.Equal(a, b) {
				t.Error("two runs of one seed end with different weights")
			}
		})
	}
	t.Run("nondeterministic", func(t *testing.T) {
		loose := cudnn.Policy{WorkspaceBytes: 256 << 20}
		if slices.Equal(weights(t, "baseline", loose), weights(t, "baseline", loose)) {
			t.Error("the atomic algorithms gave the same weights twice: the test cannot tell the policies apart")
		}
	})
}
