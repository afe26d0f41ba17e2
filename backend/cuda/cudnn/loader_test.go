//go:build gpu

package cudnn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// entryNames are the entry points cudnnapi.h declares (MC_ENTRIES).
func entryNames(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("cudnnapi.h")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`X\([^,()]+,\s*(cudnn\w+),`).FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	if len(names) < 20 {
		t.Fatalf("found %d entry points in cudnnapi.h: %v", len(names), names)
	}
	return names
}

// stub builds, with gcc, a shared library at path that exports the entry
// points cudnnapi.h declares but those in omit: cudnnGetVersion returns
// version, cudnnGetCudartVersion 12060, cudnnCreate
// CUDNN_STATUS_NOT_INITIALIZED (1001, as a cuDNN 9 without a usable GPU),
// cudnnGetErrorString a status's name, and the rest 0. It skips the test
// where gcc is absent.
func stub(t *testing.T, path string, version int, omit ...string) string {
	return stubWith(t, path, version, "", nil, omit...)
}

// stubWith is stub with prelude (C code before the entry points) and the
// entry points in code defined as given there.
func stubWith(t *testing.T, path string, version int, prelude string, code map[string]string, omit ...string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the stub libraries with")
	}
	var src strings.Builder
	src.WriteString("#include <stddef.h>\n" + prelude)
	special := map[string]string{
		"cudnnGetVersion":       fmt.Sprintf("size_t cudnnGetVersion(void) { return %d; }\n", version),
		"cudnnGetCudartVersion": "size_t cudnnGetCudartVersion(void) { return 12060; }\n",
		"cudnnGetErrorString":   "const char *cudnnGetErrorString(unsigned int s) { return s == 1001 ? \"CUDNN_STATUS_NOT_INITIALIZED\" : \"CUDNN_STATUS_OTHER\"; }\n",
		"cudnnCreate":           "unsigned int cudnnCreate(void **h) { *h = 0; return 1001; }\n",
	}
	for k, v := range code {
		special[k] = v
	}
	for _, name := range entryNames(t) {
		switch {
		case strings.Contains(" "+strings.Join(omit, " ")+" ", " "+name+" "):
		case special[name] != "":
			src.WriteString(special[name])
		default:
			fmt.Fprintf(&src, "unsigned int %s(void) { return 0; }\n", name)
		}
	}
	c := filepath.Join(t.TempDir(), "stub.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", path, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return path
}

// only is MEMUNET_CUDNN=path as the whole environment.
func only(path string) func(string) string { return env(map[string]string{EnvPath: path}) }

func wantLoadError(t *testing.T, err error, sentinel error, words ...string) {
	t.Helper()
	var le *LoadError
	if !errors.As(err, &le) || !errors.Is(err, sentinel) {
		t.Fatalf("error %v (%T): want a *LoadError wrapping %v", err, err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestLoadMissingFile: MEMUNET_CUDNN naming no file is ErrNotFound naming
// the variable and the file, and nothing else is tried.
func TestLoadMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcudnn.so.9")
	_, err := open(only(missing))
	wantLoadError(t, err, ErrNotFound, missing, EnvPath, "no such file", "unset "+EnvPath, "Fix: install cuDNN")
	if n := len(err.(*LoadError).Tried); n != 1 {
		t.Errorf("tried %d places with %s set, want 1", n, EnvPath)
	}
	notLib := filepath.Join(t.TempDir(), "libcudnn.so.9")
	if err := os.WriteFile(notLib, []byte("not a library\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = open(only(notLib))
	wantLoadError(t, err, ErrNotFound, notLib, EnvPath)
}

// TestLoadWithoutSymbols: a library that opens but lacks entry points is
// ErrNotCUDNN naming the missing ones.
func TestLoadWithoutSymbols(t *testing.T) {
	names := entryNames(t)
	lib := stub(t, filepath.Join(t.TempDir(), "libcudnn.so.9"), 90600, names[3:]...) // version, cudart, error string only
	_, err := open(only(lib))
	wantLoadError(t, err, ErrNotCUDNN, lib, "lacks", "cudnnCreate", "cudnnConvolutionForward", "cudnnFindConvolutionBackwardFilterAlgorithmEx")
	lib = stub(t, filepath.Join(t.TempDir(), "libcudnn.so.9"), 90600, "cudnnConvolutionBackwardFilter")
	_, err = open(only(lib))
	wantLoadError(t, err, ErrNotCUDNN, "lacks cudnnConvolutionBackwardFilter")
}

// TestLoadTooOld: a library with every entry point whose cudnnGetVersion
// is older than MinVersion is ErrTooOld naming both versions.
func TestLoadTooOld(t *testing.T) {
	lib := stub(t, filepath.Join(t.TempDir(), "libcudnn.so.7"), 7605)
	_, err := open(only(lib))
	wantLoadError(t, err, ErrTooOld, lib, "cuDNN 7.6.5", "older than 8.0.0")
}

// TestLoadNewEnough: a library with every entry point and a version of at
// least MinVersion loads, with its file, version and CUDA version; a
// handle on a machine without a driver is ErrNoDriver (with one, the
// stub's cudnnCreate status).
func TestLoadNewEnough(t *testing.T) {
	for _, v := range []struct {
		raw  int
		want string
	}{{8000, "8.0.0"}, {90600, "9.6.0"}} {
		path := stub(t, filepath.Join(t.TempDir(), "libcudnn.so"), v.raw)
		l, err := open(only(path))
		if err != nil {
			t.Fatalf("cuDNN %s: %v", v.want, err)
		}
		if l.Path != path || l.From != EnvPath || l.Version.String() != v.want || l.CUDA != "12.6" {
			t.Errorf("loaded %+v: want %s, cuDNN %s, CUDA 12.6, from %s", l, path, v.want, EnvPath)
		}
		if s := l.String(); s != "cuDNN "+v.want+" (CUDA 12.6) from "+path {
			t.Errorf("String() = %q", s)
		}
		_, err = l.NewHandle()
		if err == nil {
			t.Fatal("the stub's cudnnCreate fails, NewHandle did not")
		}
		if _, ok := driverState(); ok {
			var e *Error
			if !errors.As(err, &e) || e.Status != 1001 || e.Text != "CUDNN_STATUS_NOT_INITIALIZED" || errors.Is(err, ErrNoDriver) {
				t.Errorf("NewHandle with a driver: %v; want cudnnCreate's status 1001 by name", err)
			}
			continue
		}
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("NewHandle without a driver: %v; want ErrNoDriver", err)
		}
		for _, w := range []string{path, "cuDNN " + v.want, "cudnnCreate: CUDNN_STATUS_NOT_INITIALIZED", "cuda.conv: memunet", "nvidia-smi"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("NewHandle's error %q does not say %q", err, w)
			}
		}
	}
}

// TestLoadFromWheel: without MEMUNET_CUDNN and with no cuDNN on the loader
// path, the loader takes a PyTorch wheel's copy in a site-packages folder,
// going past a .so.9 there that is too old to its .so.8.
func TestLoadFromWheel(t *testing.T) {
	for _, p := range placeGroups(env(nil))[0]() {
		if l, _ := try(p); l != nil {
			t.Skipf("%s is on the loader path and comes first", l)
		}
	}
	prefix, dir := fakeVenv(t)
	old := stub(t, filepath.Join(dir, "libcudnn.so.9"), 7605)
	good := stub(t, filepath.Join(dir, "libcudnn.so.8"), 8907)
	l, err := open(env(map[string]string{"VIRTUAL_ENV": prefix}))
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != good || l.Version.String() != "8.9.7" || !strings.Contains(l.From, "PyTorch wheel") {
		t.Errorf("loaded %s from %q; want %s (cuDNN 8.9.7) from a PyTorch wheel, after refusing %s", l, l.From, good, old)
	}
}

// findStub is C for a stub whose handle starts and whose descriptors and
// Find calls check what the loader sets: the descriptors hold what they
// were given, and each pass's Find answers three rows only where its
// tensors, filter and convolution are the expected ones (XDIMS, WDIMS,
// YDIMS, packed strides, NCHW filter, PAD, STRIDE, no dilation,
// cross-correlation, fp32 sums, DTYPE and MATH), else status 2000; with
// ANY_SHAPE defined it answers any.
const findStub = `
struct desc { int dtype, format, n, dims[8], strides[8], pad[6], stride[6], dil[6], mode, ctype, math; };
static struct desc slots[64];
static int nslot;
static unsigned int make(struct desc **d) { *d = &slots[nslot++ % 64]; return 0; }
typedef struct { unsigned int algo, status; float time; size_t memory; unsigned int det, math; int reserved[3]; } perf;
static int same(const int *a, const int *b, int n) { for (int i = 0; i < n; i++) if (a[i] != b[i]) return 0; return 1; }
static int packed(const struct desc *d) { int s = 1; for (int i = d->n - 1; i >= 0; i--) { if (d->strides[i] != s) return 0; s *= d->dims[i]; } return 1; }
static int check(const struct desc *x, const struct desc *w, const struct desc *c, const struct desc *y) {
#ifdef ANY_SHAPE
	return 1;
#else
#ifndef NDIMS
#define NDIMS 4
#define PADS PAD, PAD
#define STRIDES STRIDE, STRIDE
#endif
	static const int X[] = {XDIMS}, W[] = {WDIMS}, Y[] = {YDIMS}, P[] = {PADS}, S[] = {STRIDES}, D[] = {1, 1, 1};
	return x->n == NDIMS && y->n == NDIMS && w->n == NDIMS && same(x->dims, X, NDIMS) && same(y->dims, Y, NDIMS) &&
		same(w->dims, W, NDIMS) && packed(x) && packed(y) && w->format == 0 && x->dtype == DTYPE && y->dtype == DTYPE &&
		w->dtype == DTYPE && c->n == NDIMS - 2 && same(c->pad, P, NDIMS - 2) && same(c->stride, S, NDIMS - 2) &&
		same(c->dil, D, NDIMS - 2) && c->mode == 1 && c->ctype == 0 && c->math == MATH;
#endif
}
static unsigned int rows(unsigned int pass, int want, int *got, perf *p) {
	if (want < 3) return 2000;
	perf r0 = {1, 0, 0.5f, 1024, 1, 1}, r1 = {0, 0, 0.75f, 0, pass == 0, 0}, r2 = {2, 3000, -1.0f, 0, 1, 0};
	p[0] = r0; p[1] = r1; p[2] = r2;
	*got = 3;
	return 0;
}
`

// runStub is C for the stub's three convolution calls: each answers 0
// only where its descriptors are the ones check wants, in the call's own
// argument order, its buffers are X, W and Y (0x1000, 0x2000, 0x3000) in
// their roles, its workspace 4096 bytes at 0x4000, alpha 1 and beta 1 for
// algorithm 5 (the tests' accumulate) or 0 for another; else 2000 plus
// the first thing that differs.
const runStub = `
static unsigned int args(const void *x, const void *w, const void *y, void *ws, size_t bytes, unsigned int algo, const float *alpha, const float *beta) {
	if (x != (void *)0x1000 || w != (void *)0x2000 || y != (void *)0x3000) return 2001;
	if (ws != (void *)0x4000 || bytes != 4096) return 2002;
	if (*alpha != 1.0f || *beta != (algo == 5 ? 1.0f : 0.0f)) return 2003;
	return 0;
}
`

// findHandle is a handle on a stub cuDNN of version (9.6.0: 90600) built
// from prelude (findStub and runStub, with the shape they check) and
// findCode's entry points: the library and the handle.
func findHandle(t *testing.T, version int, prelude string) (*Library, *Handle) {
	t.Helper()
	name := "libcudnn.so.9"
	if version < 90000 {
		name = "libcudnn.so.8"
	}
	l, err := open(only(stubWith(t, filepath.Join(t.TempDir(), name), version, prelude, findCode())))
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	return l, h
}

func findCode() map[string]string {
	return map[string]string{
		"cudnnConvolutionForward": "unsigned int cudnnConvolutionForward(void *h, const float *alpha, struct desc *x, const void *xp, struct desc *w, const void *wp, " +
			"struct desc *c, unsigned int algo, void *ws, size_t bytes, const float *beta, struct desc *y, void *yp) " +
			"{ return check(x, w, c, y) ? args(xp, wp, yp, ws, bytes, algo, alpha, beta) : 2000; }\n",
		"cudnnConvolutionBackwardData": "unsigned int cudnnConvolutionBackwardData(void *h, const float *alpha, struct desc *w, const void *wp, struct desc *dy, const void *dyp, " +
			"struct desc *c, unsigned int algo, void *ws, size_t bytes, const float *beta, struct desc *dx, void *dxp) " +
			"{ return check(dx, w, c, dy) ? args(dxp, wp, dyp, ws, bytes, algo, alpha, beta) : 2000; }\n",
		"cudnnConvolutionBackwardFilter": "unsigned int cudnnConvolutionBackwardFilter(void *h, const float *alpha, struct desc *x, const void *xp, struct desc *dy, const void *dyp, " +
			"struct desc *c, unsigned int algo, void *ws, size_t bytes, const float *beta, struct desc *dw, void *dwp) " +
			"{ return check(x, dw, c, dy) ? args(xp, dwp, dyp, ws, bytes, algo, alpha, beta) : 2000; }\n",
		"cudnnCreate":                      "unsigned int cudnnCreate(void **h) { *h = (void *)1; return 0; }\n",
		"cudnnCreateTensorDescriptor":      "unsigned int cudnnCreateTensorDescriptor(struct desc **d) { return make(d); }\n",
		"cudnnCreateFilterDescriptor":      "unsigned int cudnnCreateFilterDescriptor(struct desc **d) { return make(d); }\n",
		"cudnnCreateConvolutionDescriptor": "unsigned int cudnnCreateConvolutionDescriptor(struct desc **d) { return make(d); }\n",
		"cudnnSetTensorNdDescriptor": "unsigned int cudnnSetTensorNdDescriptor(struct desc *d, unsigned int t, int n, const int *dims, const int *st) " +
			"{ d->dtype = t; d->n = n; for (int i = 0; i < n; i++) { d->dims[i] = dims[i]; d->strides[i] = st[i]; } return 0; }\n",
		"cudnnSetFilterNdDescriptor": "unsigned int cudnnSetFilterNdDescriptor(struct desc *d, unsigned int t, unsigned int f, int n, const int *dims) " +
			"{ d->dtype = t; d->format = f; d->n = n; for (int i = 0; i < n; i++) d->dims[i] = dims[i]; return 0; }\n",
		"cudnnSetConvolutionNdDescriptor": "unsigned int cudnnSetConvolutionNdDescriptor(struct desc *d, int n, const int *pad, const int *st, const int *dil, unsigned int mode, unsigned int ct) " +
			"{ d->n = n; for (int i = 0; i < n; i++) { d->pad[i] = pad[i]; d->stride[i] = st[i]; d->dil[i] = dil[i]; } d->mode = mode; d->ctype = ct; return 0; }\n",
		"cudnnSetConvolutionMathType": "unsigned int cudnnSetConvolutionMathType(struct desc *d, unsigned int m) { d->math = m; return 0; }\n",
		"cudnnFindConvolutionForwardAlgorithm": "unsigned int cudnnFindConvolutionForwardAlgorithm(void *h, struct desc *x, struct desc *w, struct desc *c, struct desc *y, int want, int *got, perf *p) " +
			"{ return check(x, w, c, y) ? rows(0, want, got, p) : 2000; }\n",
		"cudnnFindConvolutionBackwardDataAlgorithm": "unsigned int cudnnFindConvolutionBackwardDataAlgorithm(void *h, struct desc *w, struct desc *dy, struct desc *c, struct desc *dx, int want, int *got, perf *p) " +
			"{ return check(dx, w, c, dy) ? rows(1, want, got, p) : 2000; }\n",
		"cudnnFindConvolutionBackwardFilterAlgorithm": "unsigned int cudnnFindConvolutionBackwardFilterAlgorithm(void *h, struct desc *x, struct desc *dy, struct desc *c, struct desc *dw, int want, int *got, perf *p) " +
			"{ return check(x, dw, c, dy) ? rows(2, want, got, p) : 2000; }\n",
	}
}

// TestFindThroughStub: Find sets the descriptors cuDNN's Find needs (the
// stub checks every field) for each pass and gives its rows as Results,
// named by pass; a wrong shape or precision is refused before any call.
func TestFindThroughStub(t *testing.T) {
	s := Shape{Input: []int{2, 8, 10, 12}, Filter: []int{16, 8, 3, 3}, Pad: 1, Stride: 2}
	prelude := "#define XDIMS 2, 8, 10, 12\n#define WDIMS 16, 8, 3, 3\n#define YDIMS 2, 16, 5, 6\n#define PAD 1\n#define STRIDE 2\n" +
		"#define DTYPE 2\n#define MATH 1\n" + findStub + runStub // fp16: CUDNN_DATA_HALF, CUDNN_TENSOR_OP_MATH
	_, h := findHandle(t, 90600, prelude)
	for p := Forward; p < numPasses; p++ {
		got, err := h.Find(p, s, "fp16")
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want := []Result{
			{Algo: 1, Name: AlgoName(p, 1), TimeMS: 0.5, WorkspaceBytes: 1024, Deterministic: true, MathType: 1},
			{Algo: 0, Name: AlgoName(p, 0), TimeMS: 0.75, Deterministic: p == Forward},
			{Algo: 2, Name: AlgoName(p, 2), Status: 3000, TimeMS: -1, Deterministic: true},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
	if _, err := h.Find(Forward, s, "tf32"); err == nil || !strings.Contains(err.Error(), "cudnnFindConvolutionForwardAlgorithm: CUDNN_STATUS_OTHER") {
		t.Errorf("tf32 where the stub wants fp16's types: %v; want the stub's refusal by call and status", err)
	}
	for _, bad := range []struct {
		s    Shape
		prec string
	}{
		{s, "fp64"}, {Shape{Input: []int{2, 8, 10}, Filter: []int{16, 8, 3}, Stride: 1}, "fp16"},
		{Shape{Input: []int{2, 8, 10, 12}, Filter: []int{16, 4, 3, 3}, Stride: 1}, "fp16"},
		{Shape{Input: []int{2, 8, 2, 2}, Filter: []int{16, 8, 5, 5}, Stride: 1}, "fp16"},
	} {
		if _, err := h.Find(Forward, bad.s, bad.prec); err == nil || !strings.HasPrefix(err.Error(), "cudnn: ") {
			t.Errorf("Find(%+v, %s): %v; want a refusal", bad.s, bad.prec, err)
		}
	}
	runThroughStub(t, h, s)
	if err := h.SetStream(0); err != nil {
		t.Error(err)
	}
	if err := h.Close(); err != nil {
		t.Error(err)
	}
}

// runThroughStub: Run gives each pass's call its descriptors (the stub
// checks every field, as Find's do, the math type among them: Run sets
// the chosen row's) and the buffers in their roles, beta 1 to accumulate
// and 0 not; the stub's refusal comes back by call; exact fp32 refuses a
// math type other than FMA before any call.
func runThroughStub(t *testing.T, h *Handle, s Shape) {
	t.Helper()
	b := Buffers{X: 0x1000, W: 0x2000, Y: 0x3000, Workspace: 0x4000, WorkspaceBytes: 4096}
	tensorOp := func(algo int) Algorithm { return Algorithm{Algo: algo, MathType: MathTensorOp} }
	for p := Forward; p < numPasses; p++ {
		for _, acc := range []bool{false, true} {
			b.Accumulate = acc
			algo := 1
			if acc {
				algo = 5
			}
			if err := h.Run(p, s, "fp16", tensorOp(algo), b); err != nil {
				t.Errorf("%s, accumulate %v: %v", p, acc, err)
			}
		}
	}
	if err := h.Run(Forward, s, "fp16", Algorithm{Algo: 1, MathType: MathDefault}, b); err == nil || !strings.Contains(err.Error(), "status 2000") {
		t.Errorf("the default math type where the stub's descriptor wants tensor ops: %v; want the stub's refusal", err)
	}
	// Find sets the precision's math type again after a run left another.
	if _, err := h.Find(Forward, s, "fp16"); err != nil {
		t.Errorf("Find after a run with another math type: %v", err)
	}
	b.Accumulate = false
	if err := h.Run(BackwardFilter, s, "fp16", tensorOp(5), b); err == nil || !strings.Contains(err.Error(), "cudnnConvolutionBackwardFilter: CUDNN_STATUS_OTHER (status 2003)") {
		t.Errorf("beta 0 where the stub wants 1: %v; want its refusal by call and status", err)
	}
	b.X, b.Y = b.Y, b.X
	if err := h.Run(Forward, s, "fp16", tensorOp(1), b); err == nil || !strings.Contains(err.Error(), "status 2001") {
		t.Errorf("x and y swapped: %v; want the stub's refusal", err)
	}
	if err := h.Run(Forward, s, "tf32", tensorOp(1), b); err == nil || !strings.Contains(err.Error(), "status 2000") {
		t.Errorf("tf32 where the stub wants fp16's descriptors: %v; want the stub's refusal", err)
	}
	if err := h.Run(Forward, s, "fp32", Algorithm{Algo: 1, MathType: MathDefault}, b); err == nil || !strings.Contains(err.Error(), "FMA math only") {
		t.Errorf("exact fp32 with the default math type (TF32): %v; want a refusal", err)
	}
}

// TestFindAndRunThroughStub3D: a 3D convolution's descriptors are 5D,
// its padding and stride given per axis (here a 1x2x2 transposed
// convolution's stride and a depth pad unlike the others), which the stub
// checks field by field for Find and Run alike.
func TestFindAndRunThroughStub3D(t *testing.T) {
	s := Shape{Input: []int{2, 4, 6, 10, 14}, Filter: []int{3, 4, 1, 3, 3}, Pads: []int{0, 1, 1}, Strides: []int{1, 2, 2}}
	prelude := "#define NDIMS 5\n#define XDIMS 2, 4, 6, 10, 14\n#define WDIMS 3, 4, 1, 3, 3\n#define YDIMS 2, 3, 6, 5, 7\n" +
		"#define PADS 0, 1, 1\n#define STRIDES 1, 2, 2\n#define DTYPE 9\n#define MATH 1\n" + findStub + runStub // bf16
	_, h := findHandle(t, 90600, prelude)
	b := Buffers{X: 0x1000, W: 0x2000, Y: 0x3000, Workspace: 0x4000, WorkspaceBytes: 4096}
	for p := Forward; p < numPasses; p++ {
		if rs, err := h.Find(p, s, "bf16"); err != nil || len(rs) != 3 {
			t.Errorf("%s: Find: %v, %v", p, rs, err)
		}
		if err := h.Run(p, s, "bf16", Algorithm{Algo: 1, MathType: MathTensorOp}, b); err != nil {
			t.Errorf("%s: Run: %v", p, err)
		}
	}
	flat := s
	flat.Pads, flat.Pad = nil, 1 // the same padding on every axis: not what the stub wants
	if _, err := h.Find(Forward, flat, "bf16"); err == nil || !strings.Contains(err.Error(), "status 2000") {
		t.Errorf("a uniform pad where the stub wants 0,1,1: %v; want its refusal", err)
	}
}

// TestBF16NeedsCUDNN81: cuDNN 8.0 has no bf16 data type: a bf16
// convolution is refused by name before any call, fp16 is not.
func TestBF16NeedsCUDNN81(t *testing.T) {
	_, h := findHandle(t, 8005, "#define ANY_SHAPE\n"+findStub+runStub)
	s := Shape{Input: []int{2, 8, 10, 12}, Filter: []int{16, 8, 3, 3}, Pad: 1, Stride: 1}
	if _, err := h.Find(Forward, s, "bf16"); err == nil || !strings.Contains(err.Error(), "no bf16 convolutions (cuDNN 8.1.0 or newer has)") {
		t.Errorf("bf16 on cuDNN 8.0.5: %v; want a refusal naming 8.1", err)
	}
	if _, err := h.Find(Forward, s, "fp16"); err != nil {
		t.Errorf("fp16 on cuDNN 8.0.5: %v", err)
	}
}
