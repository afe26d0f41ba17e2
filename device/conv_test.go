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
// the CUDA backend has (nothing else of it is called).
type fakeGPU struct {
	backend.Backend
	p cuda.ConvProvider
}

func (f *fakeGPU) SetConvProvider(p cuda.ConvProvider) { f.p = p }
func (f *fakeGPU) ConvProvider() cuda.ConvProvider     { return f.p }
func (f *fakeGPU) Describe() string                    { return "cuda:0 Fake GPU" }

// withLoader makes loadCUDNN give lib or err, counting its calls.
func withLoader(t *testing.T, lib string, err error) *int {
	t.Helper()
	calls := 0
	old := loadCUDNN
	loadCUDNN = func() (string, error) { calls++; return lib, err }
	t.Cleanup(func() { loadCUDNN = old })
	return &calls
}

const lib = "cuDNN 9.6.0 (CUDA 12.6) from /opt/cudnn/libcudnn.so.9"

var notFound = &cudnn.LoadError{Tried: []cudnn.Attempt{{Place: cudnn.Place{Path: "libcudnn.so.9", From: "the loader path"}, Why: "not found", Err: cudnn.ErrNotFound}},
	Err: cudnn.ErrNotFound}

// TestResolveConv: cuda.conv memunet loads nothing; cudnn is an error
// naming the places tried and the other choices where no cuDNN is usable;
// auto records the library or why there is none; each says that memunet's
// kernels compute (the backend does not call cuDNN's convolutions yet);
// the CPU ignores the key.
func TestResolveConv(t *testing.T) {
	calls := withLoader(t, "", errors.New("must not load"))
	g := &fakeGPU{}
	if err := ResolveConv(g, "memunet"); err != nil || *calls != 0 {
		t.Fatalf("memunet: %v after %d loads; want no load", err, *calls)
	}
	if g.p.Note() != "" || g.p.Computes() != "memunet" || !strings.Contains(Describe(g), "convolutions: memunet's kernels (cuda.conv memunet)") {
		t.Errorf("memunet: note %q, describe %q", g.p.Note(), Describe(g))
	}
	if err := ResolveConv(cpu.New(), "cudnn"); err != nil || *calls != 0 {
		t.Errorf("the CPU with cuda.conv cudnn: %v after %d loads; want it ignored", err, *calls)
	}

	for _, choice := range []string{"cudnn", "auto"} {
		withLoader(t, lib, nil)
		g := &fakeGPU{}
		if err := ResolveConv(g, choice); err != nil {
			t.Fatalf("%s with a library: %v", choice, err)
		}
		if g.p.CUDNN != lib || g.p.Computes() != "memunet" {
			t.Errorf("%s: recorded %+v", choice, g.p)
		}
		for _, w := range []string{"cuda.conv: " + choice, "loaded " + lib, "does not call cuDNN's convolutions yet", "memunet's kernels compute"} {
			if !strings.Contains(g.p.Note(), w) {
				t.Errorf("%s: note %q does not say %q", choice, g.p.Note(), w)
			}
		}
		if d := Describe(g); !strings.HasPrefix(d, "cuda:0 Fake GPU; convolutions: memunet's kernels") || !strings.Contains(d, lib) {
			t.Errorf("%s: describe %q", choice, d)
		}
	}

	withLoader(t, "", notFound)
	err := ResolveConv(&fakeGPU{}, "cudnn")
	if !errors.Is(err, cudnn.ErrNotFound) {
		t.Fatalf("cudnn without a library: %v; want the loader's ErrNotFound", err)
	}
	for _, w := range []string{"cuda.conv: cudnn: no cuDNN library found", "libcudnn.so.9 (the loader path)", "Fix:", "cuda.conv: auto", "memunet"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	g = &fakeGPU{}
	if err := ResolveConv(g, "auto"); err != nil {
		t.Fatalf("auto without a library: %v", err)
	}
	if g.p.CUDNN != "" || g.p.Missing != "no cuDNN library found" ||
		!strings.Contains(g.p.Note(), "cuda.conv: auto: memunet's kernels compute the convolutions (no cuDNN library found; --set cuda.conv=cudnn says where it looked)") {
		t.Errorf("auto without a library: %+v, note %q", g.p, g.p.Note())
	}
}
