package device

import (
	"errors"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
)

// fakeGPU is a backend with a convolution provider and a description, as
// the CUDA backend has (nothing else of it is called); it records the
// library it is given and its policy.
type fakeGPU struct {
	backend.Backend
	p        cuda.ConvProvider
	lib      cuda.ConvLibrary
	policy   cudnn.Policy
	required bool
}

func (f *fakeGPU) SetConvProvider(p cuda.ConvProvider) { f.p = p }
func (f *fakeGPU) ConvProvider() cuda.ConvProvider     { return f.p }
func (f *fakeGPU) Describe() string                    { return "cuda:0 Fake GPU" }
func (f *fakeGPU) OnContext(fn func() error) error     { return fn() }
func (f *fakeGPU) OpenConvLibrary(open func() (cuda.ConvLibrary, error)) (cuda.ConvLibrary, error) {
	return open()
}
func (f *fakeGPU) ConvChoices() []cuda.LibraryChoice { return nil }
func (f *fakeGPU) UseConvLibrary(lib cuda.ConvLibrary, p cudnn.Policy, required bool) {
	f.lib, f.policy, f.required = lib, p, required
}

// namedLibrary is a convolution library that only has a name.
type namedLibrary struct {
	cuda.ConvLibrary
	name string
}

func (l namedLibrary) Name() string { return l.name }

// withLoader makes openCUDNN give a library named lib, or err, counting
// its calls.
func withLoader(t *testing.T, lib string, err error) *int {
	t.Helper()
	calls := 0
	old := openCUDNN
	openCUDNN = func(ConvResolver) (cuda.ConvLibrary, error) {
		calls++
		if err != nil {
			return nil, err
		}
		return namedLibrary{name: lib}, nil
	}
	t.Cleanup(func() { openCUDNN = old })
	return &calls
}

const lib = "cuDNN 9.6.0 (CUDA 12.6) from /opt/cudnn/libcudnn.so.9"

var notFound = &cudnn.LoadError{Tried: []cudnn.Attempt{{Place: cudnn.Place{Path: "libcudnn.so.9", From: "the loader path"}, Why: "not found", Err: cudnn.ErrNotFound}},
	Err: cudnn.ErrNotFound}

// TestResolveConv: cuda.conv memunet loads nothing and gives the backend
// no library; cudnn is an error naming the places tried and the other
// choices where no cuDNN is usable; cudnn and auto give the backend the
// library with the config's policy (cudnn requiring it) and say that it
// computes; auto without one records why and leaves the convolutions to
// memunet's kernels; the CPU ignores the key.
func TestResolveConv(t *testing.T) {
	calls := withLoader(t, "", errors.New("must not load"))
	g := &fakeGPU{}
	policy := cudnn.Policy{WorkspaceBytes: 64 << 20, Deterministic: true}
	if err := ResolveConv(g, "memunet", policy); err != nil || *calls != 0 || g.lib != nil {
		t.Fatalf("memunet: %v after %d loads; want no load", err, *calls)
	}
	if g.p.Note() != "" || g.p.Computes() != "memunet" || !strings.Contains(Describe(g), "convolutions: memunet's kernels (cuda.conv memunet)") {
		t.Errorf("memunet: note %q, describe %q", g.p.Note(), Describe(g))
	}
	if err := ResolveConv(cpu.New(), "cudnn", policy); err != nil || *calls != 0 {
		t.Errorf("the CPU with cuda.conv cudnn: %v after %d loads; want it ignored", err, *calls)
	}

	for _, choice := range []string{"cudnn", "auto"} {
		withLoader(t, lib, nil)
		g := &fakeGPU{}
		if err := ResolveConv(g, choice, policy); err != nil {
			t.Fatalf("%s with a library: %v", choice, err)
		}
		if g.p.CUDNN != lib || g.p.Computes() != "cudnn" || g.lib == nil || g.lib.Name() != lib || g.policy != policy ||
			g.required != (choice == "cudnn") {
			t.Errorf("%s: recorded %+v, gave the backend %v (%+v, required %v)", choice, g.p, g.lib, g.policy, g.required)
		}
		for _, w := range []string{"cuda.conv: " + choice, lib + " computes the convolutions", "cuda.workspace and cuda.deterministic"} {
			if !strings.Contains(g.p.Note(), w) {
				t.Errorf("%s: note %q does not say %q", choice, g.p.Note(), w)
			}
		}
		if d := Describe(g); d != "cuda:0 Fake GPU; convolutions: "+lib+" (cuda.conv "+choice+")" {
			t.Errorf("%s: describe %q", choice, d)
		}
	}

	withLoader(t, "", notFound)
	err := ResolveConv(&fakeGPU{}, "cudnn", policy)
	if !errors.Is(err, cudnn.ErrNotFound) {
		t.Fatalf("cudnn without a library: %v; want the loader's ErrNotFound", err)
	}
	for _, w := range []string{"cuda.conv: cudnn: no cuDNN library found", "libcudnn.so.9 (the loader path)", "Fix:", "cuda.conv: auto", "memunet"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	g = &fakeGPU{}
	if err := ResolveConv(g, "auto", policy); err != nil {
		t.Fatalf("auto without a library: %v", err)
	}
	if g.p.CUDNN != "" || g.lib != nil || g.p.Missing != "no cuDNN library found" ||
		!strings.Contains(g.p.Note(), "cuda.conv: auto: memunet's kernels compute the convolutions (no cuDNN library found; --set cuda.conv=cudnn says where it looked)") {
		t.Errorf("auto without a library: %+v, note %q", g.p, g.p.Note())
	}
}

// cachedLibrary is a named library that keeps Find's results in a file.
type cachedLibrary struct {
	namedLibrary
	path string
}

func (l cachedLibrary) CachePath() string { return l.path }

// TestResolveConvNamesFindCache: where the library keeps Find's times in
// a file, the run's note names it; where it keeps none, the note says
// that two runs may choose differently and how the cache is set.
func TestResolveConvNamesFindCache(t *testing.T) {
	old := openCUDNN
	t.Cleanup(func() { openCUDNN = old })
	for _, path := range []string{"/cache/gpu.json", ""} {
		openCUDNN = func(ConvResolver) (cuda.ConvLibrary, error) { return cachedLibrary{namedLibrary{name: lib}, path}, nil }
		g := &fakeGPU{}
		if err := ResolveConv(g, "auto", cudnn.Policy{}); err != nil {
			t.Fatal(err)
		}
		want := "kept in /cache/gpu.json (delete it to measure again)"
		if path == "" {
			want = "measured afresh by each process (" + cudnn.CacheEnv + " off), so two runs may choose differently"
		}
		if g.p.FindCache != path || !strings.Contains(g.p.Note(), want) {
			t.Errorf("cache %q: recorded %q, note %q; want it to say %q", path, g.p.FindCache, g.p.Note(), want)
		}
	}
}
