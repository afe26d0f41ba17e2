package cudnn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNondeterministicAlgorithms names the algorithms cuDNN documents as
// nondeterministic, the ones cuda.deterministic refuses: backward data
// ALGO_0, backward filter ALGO_0 and ALGO_3; no forward algorithm.
func TestNondeterministicAlgorithms(t *testing.T) {
	want := map[string]bool{"backward_data ALGO_0": true, "backward_filter ALGO_0": true, "backward_filter ALGO_3": true}
	for p := Forward; p < numPasses; p++ {
		for a := range algoNames[p] {
			key := p.String() + " " + AlgoName(p, a)
			if Nondeterministic(p, a) != want[key] {
				t.Errorf("Nondeterministic(%s) = %v, want %v", key, Nondeterministic(p, a), want[key])
			}
		}
	}
}

// tables reads every table in testdata: the hand-written fixture now, the
// tables a device run records once they are committed there.
func tables(t *testing.T) map[string]Table {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no algorithm tables in testdata: %v", err)
	}
	out := map[string]Table{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tab Table
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tab); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := tab.Check(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = tab
	}
	return out
}

// policies are the budgets and determinism the invariants are held at:
// none, small, the default (cuda.workspace 256), large, and unbounded.
func policies() []Policy {
	var ps []Policy
	for _, mib := range []int64{0, 1, 16, 256, 1024, 1 << 20} {
		for _, det := range []bool{true, false} {
			ps = append(ps, Policy{WorkspaceBytes: mib << 20, Deterministic: det})
		}
	}
	return ps
}

// TestPolicyOnTables holds the policy to its invariants on every table
// and policy: a chosen algorithm ran, needs no more workspace than the
// budget, is deterministic (by cuDNN's field and its documentation) when
// cuda.deterministic is on, and no admissible algorithm is faster; where
// it chooses none, none is admissible and the error names the smallest
// workspace that would do. The plan's workspace is its largest choice's.
func TestPolicyOnTables(t *testing.T) {
	for file, tab := range tables(t) {
		holdPolicy(t, file, tab)
	}
}

// holdPolicy checks TestPolicyOnTables's invariants on tab at every one of
// policies(); name says which table in messages.
func holdPolicy(t *testing.T, name string, tab Table) {
	t.Helper()
	for _, pol := range policies() {
		plan, _ := pol.Plan(tab)
		var most int64
		for _, e := range tab.Layers {
			r, err := pol.Choose(e)
			var admissible []Result
			smallest := int64(-1)
			for _, x := range e.Results {
				det := x.Deterministic && !Nondeterministic(e.Pass, x.Algo)
				if x.Status != 0 || x.TimeMS < 0 || (pol.Deterministic && !det) {
					continue
				}
				if smallest < 0 || x.WorkspaceBytes < smallest {
					smallest = x.WorkspaceBytes
				}
				if x.WorkspaceBytes <= pol.WorkspaceBytes {
					admissible = append(admissible, x)
				}
			}
			where := name + " " + e.Layer + " " + e.Pass.String()
			if err != nil {
				var nf *NoFitError
				if !errors.As(err, &nf) || len(admissible) > 0 || nf.Smallest != smallest {
					t.Errorf("%s %+v: %v; admissible %v, smallest %d", where, pol, err, admissible, smallest)
				}
				continue
			}
			switch {
			case r.Status != 0 || r.TimeMS < 0:
				t.Errorf("%s %+v: chose %s, which did not run", where, pol, r.Name)
			case r.WorkspaceBytes > pol.WorkspaceBytes:
				t.Errorf("%s %+v: chose %s, which needs %d bytes of workspace, over the budget", where, pol, r.Name, r.WorkspaceBytes)
			case pol.Deterministic && (!r.Deterministic || Nondeterministic(e.Pass, r.Algo)):
				t.Errorf("%s %+v: chose %s, a nondeterministic algorithm, with cuda.deterministic on", where, pol, r.Name)
			}
			for _, x := range admissible {
				if x.TimeMS < r.TimeMS {
					t.Errorf("%s %+v: chose %s (%g ms) over the faster %s (%g ms)", where, pol, r.Name, r.TimeMS, x.Name, x.TimeMS)
				}
			}
			most = max(most, r.WorkspaceBytes)
		}
		if plan.WorkspaceBytes != most || plan.WorkspaceBytes > pol.WorkspaceBytes {
			t.Errorf("%s %+v: plan workspace %d, want %d (its largest choice), within the budget", name, pol, plan.WorkspaceBytes, most)
		}
	}
}

// TestPolicyWouldBeCaught: the fixture is such that ignoring determinism
// or the budget changes the choice (the invariants above are not
// vacuous), and a row that calls a documented nondeterministic algorithm
// deterministic is still refused.
func TestPolicyWouldBeCaught(t *testing.T) {
	tab := tables(t)[filepath.Join("testdata", "handwritten_seed_unet_tf32.json")]
	det := Policy{WorkspaceBytes: 256 << 20, Deterministic: true}
	any := Policy{WorkspaceBytes: 256 << 20}
	unbounded := Policy{WorkspaceBytes: 1 << 40, Deterministic: true}
	nondet, overBudget := 0, 0
	for _, e := range tab.Layers {
		a, errA := any.Choose(e)
		d, errD := det.Choose(e)
		u, errU := unbounded.Choose(e)
		if errA != nil || errD != nil || errU != nil {
			t.Fatalf("%s %s: %v %v %v", e.Layer, e.Pass, errA, errD, errU)
		}
		if Nondeterministic(e.Pass, a.Algo) && a != d {
			nondet++
		}
		if u.WorkspaceBytes > det.WorkspaceBytes {
			overBudget++
		}
	}
	if nondet == 0 || overBudget == 0 {
		t.Errorf("in the fixture, a nondeterministic algorithm is the fastest that fits in %d passes and the fastest needs over 256 MiB in %d: want both", nondet, overBudget)
	}
	e := Entry{Layer: "l", Pass: BackwardFilter, Results: []Result{
		{Algo: 3, Name: "ALGO_3", TimeMS: 0.1, Deterministic: true}, // mislabeled: cuDNN documents ALGO_3 as nondeterministic
		{Algo: 1, Name: "ALGO_1", TimeMS: 0.2, Deterministic: true},
	}}
	if r, err := det.Choose(e); err != nil || r.Algo != 1 {
		t.Errorf("chose %v (%v): want ALGO_1 over an ALGO_3 labeled deterministic", r.Name, err)
	}
}

// TestNoFitError: where nothing admissible fits, the error names the layer,
// the pass, the budget, the smallest workspace that would fit and the
// cuda.workspace that gives it; where nothing admissible ran, the other
// choices.
func TestNoFitError(t *testing.T) {
	e := Entry{Layer: "up1.conv.double_conv.0", Pass: BackwardFilter, Results: []Result{
		{Algo: 0, Name: "ALGO_0", TimeMS: 0.1},
		{Algo: 5, Name: "WINOGRAD_NONFUSED", TimeMS: 0.3, WorkspaceBytes: 40 << 20, Deterministic: true},
		{Algo: 6, Name: "FFT_TILING", TimeMS: 0.5, WorkspaceBytes: 3<<20 + 1, Deterministic: true},
		{Algo: 1, Name: "ALGO_1", Status: 3000, TimeMS: -1, Deterministic: true},
	}}
	_, err := Policy{WorkspaceBytes: 1 << 20, Deterministic: true}.Choose(e)
	for _, w := range []string{"up1.conv.double_conv.0 backward_filter", "no deterministic cuDNN algorithm fits cuda.workspace (1.00 MiB)",
		"needs 3.00 MiB", "cuda.workspace to at least 4 (MiB)", "cuda.conv: memunet"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not say %q", err, w)
		}
	}
	if r, err := (Policy{WorkspaceBytes: 1 << 20}).Choose(e); err != nil || r.Algo != 0 {
		t.Errorf("nondeterministic allowed: %v %v, want ALGO_0", r.Name, err)
	}
	e.Results = e.Results[:1]
	_, err = Policy{WorkspaceBytes: 1 << 30, Deterministic: true}.Choose(e)
	if err == nil || !strings.Contains(err.Error(), "no deterministic cuDNN algorithm ran") || !strings.Contains(err.Error(), "cuda.deterministic: false") {
		t.Errorf("nothing deterministic ran: %v", err)
	}
	_, err = Policy{WorkspaceBytes: 1 << 30, Deterministic: true}.Plan(Table{Layers: []Entry{e, e}})
	if n := strings.Count(err.Error(), "no deterministic cuDNN algorithm ran"); n != 2 {
		t.Errorf("Plan's error names %d of 2 layers: %v", n, err)
	}
}

// TestTableCheck: a pass by name round-trips, and a row whose name is not
// its algorithm's is refused.
func TestTableCheck(t *testing.T) {
	for p := Forward; p < numPasses; p++ {
		b, _ := p.MarshalText()
		var q Pass
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Errorf("pass %s round-trips to %s (%v)", p, q, err)
		}
	}
	var q Pass
	if err := q.UnmarshalText([]byte("backward")); err == nil {
		t.Error("pass \"backward\" accepted")
	}
	bad := Table{Layers: []Entry{{Layer: "l", Pass: BackwardFilter, Results: []Result{{Algo: 3, Name: "FFT_TILING"}}}}}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), `"ALGO_3"`) {
		t.Errorf("a mislabeled row: %v", err)
	}
}

// TestShapeOutput: a shape's output dimensions, with one padding and
// stride for every spatial axis or one per axis (a 3D transposed
// convolution's 1x2x2 stride), and the shapes cuDNN would refuse.
func TestShapeOutput(t *testing.T) {
	for _, c := range []struct {
		s    Shape
		want []int // nil: refused
	}{
		{Shape{Input: []int{4, 64, 256, 256}, Filter: []int{64, 64, 3, 3}, Pad: 1, Stride: 1}, []int{4, 64, 256, 256}},
		{Shape{Input: []int{2, 8, 10, 12}, Filter: []int{16, 8, 3, 3}, Pad: 1, Stride: 2}, []int{2, 16, 5, 6}},
		{Shape{Input: []int{2, 4, 6, 10, 14}, Filter: []int{3, 4, 1, 2, 2}, Strides: []int{1, 2, 2}}, []int{2, 3, 6, 5, 7}},
		{Shape{Input: []int{1, 3, 5, 4, 3}, Filter: []int{2, 3, 3, 3, 3}, Pads: []int{1, 0, 1}, Stride: 1}, []int{1, 2, 5, 2, 3}},
		{Shape{Input: []int{2, 8, 10}, Filter: []int{16, 8, 3}, Stride: 1}, nil},
		{Shape{Input: []int{2, 8, 10, 12}, Filter: []int{16, 4, 3, 3}, Stride: 1}, nil},
		{Shape{Input: []int{2, 8, 2, 2}, Filter: []int{16, 8, 5, 5}, Stride: 1}, nil},
		{Shape{Input: []int{2, 8, 10, 12}, Filter: []int{16, 8, 3, 3}}, nil},
		{Shape{Input: []int{2, 8, 4, 10, 12}, Filter: []int{16, 8, 1, 3, 3}, Pads: []int{0, 1}, Stride: 1}, nil},
	} {
		got, err := c.s.Output()
		if c.want == nil {
			if err == nil {
				t.Errorf("%+v: %v, want a refusal", c.s, got)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%+v: %v (%v), want %v", c.s, got, err, c.want)
		}
	}
}

// TestPolicyMathTypes: Find times each algorithm under the descriptor's
// math type and the default one, and the default one takes TF32 for
// fp32 data: exact fp32 chooses among FMA rows only, however fast the
// others; tf32 and the 16-bit precisions take any math type.
func TestPolicyMathTypes(t *testing.T) {
	rows := []Result{
		{Algo: 1, Name: "IMPLICIT_PRECOMP_GEMM", TimeMS: 0.2, Deterministic: true, MathType: MathDefault},
		{Algo: 1, Name: "IMPLICIT_PRECOMP_GEMM", TimeMS: 0.9, Deterministic: true, MathType: MathFMA},
		{Algo: 0, Name: "IMPLICIT_GEMM", TimeMS: 0.5, Deterministic: true, MathType: MathTensorOp},
	}
	pol := Policy{WorkspaceBytes: 1 << 20, Deterministic: true}
	for prec, want := range map[string]Algorithm{
		"fp32": {Algo: 1, MathType: MathFMA},
		"tf32": {Algo: 1, MathType: MathDefault},
		"fp16": {Algo: 1, MathType: MathDefault},
	} {
		r, err := pol.Choose(Entry{Layer: "l", Pass: Forward, Precision: prec, Results: rows})
		if err != nil || r.Algorithm() != want {
			t.Errorf("%s: chose %+v (%v), want %+v", prec, r.Algorithm(), err, want)
		}
	}
	if r, err := pol.Choose(Entry{Layer: "l", Pass: Forward, Precision: "fp32", Results: rows[:1]}); err == nil {
		t.Errorf("fp32 with no FMA row chose %+v", r)
	}
}
