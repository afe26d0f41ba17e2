package cudnn

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// Pass is one of a convolution's three passes, each with its own set of
// cuDNN algorithms.
type Pass int

const (
	Forward        Pass = iota // cudnnConvolutionForward: cudnnConvolutionFwdAlgo_t
	BackwardData               // cudnnConvolutionBackwardData: cudnnConvolutionBwdDataAlgo_t
	BackwardFilter             // cudnnConvolutionBackwardFilter: cudnnConvolutionBwdFilterAlgo_t
	numPasses
)

var passNames = [numPasses]string{"forward", "backward_data", "backward_filter"}

func (p Pass) String() string {
	if p < 0 || p >= numPasses {
		return fmt.Sprintf("pass(%d)", int(p))
	}
	return passNames[p]
}

// MarshalText writes the pass's name (forward, backward_data,
// backward_filter).
func (p Pass) MarshalText() ([]byte, error) {
	if p < 0 || p >= numPasses {
		return nil, fmt.Errorf("no pass %d", int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText reads what MarshalText writes.
func (p *Pass) UnmarshalText(b []byte) error {
	i := slices.Index(passNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("pass %q: want %s", b, strings.Join(passNames[:], ", "))
	}
	*p = Pass(i)
	return nil
}

// algoNames are each pass's algorithms by their cuDNN enum value, named as
// cudnn.h names them after CUDNN_CONVOLUTION_{FWD,BWD_DATA,BWD_FILTER}_ALGO_.
var algoNames = [numPasses][]string{
	Forward:        {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"},
	BackwardData:   {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"},
	BackwardFilter: {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"},
}

// AlgoName is the name of pass p's algorithm algo ("" where cuDNN 9 has
// none by that number).
func AlgoName(p Pass, algo int) string {
	if p < 0 || p >= numPasses || algo < 0 || algo >= len(algoNames[p]) {
		return ""
	}
	return algoNames[p][algo]
}

// Nondeterministic reports whether cuDNN documents pass p's algorithm algo
// as nondeterministic: it sums partial products with atomic adds, so the
// bits of a result depend on the order the GPU's blocks finish in.
// Backward data ALGO_0 and backward filter ALGO_0 and ALGO_3 are; every
// forward algorithm and the rest of the backward ones are deterministic
// (cudnn.h marks those three "non-deterministic", cuDNN 8.x and 9.x).
// The policy refuses these under cuda.deterministic whatever a result's
// own determinism field says.
func Nondeterministic(p Pass, algo int) bool {
	switch p {
	case BackwardData:
		return algo == 0
	case BackwardFilter:
		return algo == 0 || algo == 3
	}
	return false
}

// Result is one algorithm's row of cuDNN's answer for one layer and pass
// (cudnnConvolution*AlgoPerf_t, from cudnnFind*AlgorithmEx).
type Result struct {
	Algo int `json:"algo"`
	// Name is AlgoName(pass, Algo), for a reader of the tables.
	Name string `json:"name"`
	// Status is the algorithm's cudnnStatus_t: 0 where it ran.
	Status int     `json:"status"`
	TimeMS float64 `json:"time_ms"`
	// WorkspaceBytes is the workspace it needs (the struct's memory).
	WorkspaceBytes int64 `json:"workspace_bytes"`
	// Deterministic is cuDNN's determinism field.
	Deterministic bool `json:"deterministic"`
	// MathType is its cudnnMathType_t (0 default, 1 tensor ops, 2 tensor
	// ops allowing conversion, 3 FMA).
	MathType int `json:"math_type"`
}

// Algorithm is what a pass runs with: cuDNN's algorithm and the math type
// Find measured it under (Find tries the descriptor's math type and the
// default one, so one algorithm may have a row for each).
type Algorithm struct {
	Algo     int
	MathType int
}

// Algorithm is r's algorithm and math type.
func (r Result) Algorithm() Algorithm { return Algorithm{Algo: r.Algo, MathType: r.MathType} }

// The math types (cudnnMathType_t) a row may have.
const (
	MathDefault  = 0 // cuDNN's choice: TF32 tensor cores for fp32 on Ampere and newer
	MathTensorOp = 1
	MathFMA      = 3 // no tensor cores: exact fp32
)

// mathAllowed reports whether a row of math type math computes as
// precision asks: exact fp32 only with FMA math (Find also times the
// default math, which takes TF32); the others with any.
func mathAllowed(precision string, math int) bool {
	return precision != "fp32" || math == MathFMA
}

// Shape is a convolution's shape, as cuDNN's descriptors give it.
type Shape struct {
	// Input is N, C, H, W (N, C, D, H, W in 3D); Filter K, C, R, S (K, C,
	// T, R, S).
	Input  []int `json:"input"`
	Filter []int `json:"filter"`
	// Pad and Stride are every spatial axis's, unless Pads and Strides
	// give one per spatial axis (D, H, W): a 3D convolution's may differ.
	Pad     int   `json:"pad"`
	Stride  int   `json:"stride"`
	Pads    []int `json:"pads,omitempty"`
	Strides []int `json:"strides,omitempty"`
}

// ConvShapeOf is memunet's convolution s as cuDNN's descriptors give it:
// input (N,C,H,W), filter (OC,C,K,K), pad Pad, stride 1; in 3D input
// (N,C,D,H,W), filter (OC,C,KD,K,K), pads (PadD,Pad,Pad).
func ConvShapeOf(s backend.ConvShape) Shape {
	if s.Is3D() {
		return Shape{Input: []int{s.N, s.C, s.Depth(), s.H, s.W}, Filter: []int{s.OC, s.C, s.KDepth(), s.K, s.K},
			Pads: []int{s.PadD, s.Pad, s.Pad}, Stride: 1}
	}
	return Shape{Input: []int{s.N, s.C, s.H, s.W}, Filter: []int{s.OC, s.C, s.K, s.K}, Pad: s.Pad, Stride: 1}
}

// PadAt is the padding of spatial axis i (0: the first after C).
func (s Shape) PadAt(i int) int {
	if s.Pads != nil {
		return s.Pads[i]
	}
	return s.Pad
}

// StrideAt is the stride of spatial axis i.
func (s Shape) StrideAt(i int) int {
	if s.Strides != nil {
		return s.Strides[i]
	}
	return s.Stride
}

// Output is the output's dimensions (N, K, then each spatial axis's),
// or an error where the shape is not a convolution cuDNN takes: input and
// filter of one rank, 4 or 5, the same C, strides of 1 or more, no
// negative padding, a filter no larger than the padded input.
func (s Shape) Output() ([]int, error) {
	dims := len(s.Input)
	bad := dims != 4 && dims != 5 || len(s.Filter) != dims || s.Input[1] != s.Filter[1] ||
		s.Pads != nil && len(s.Pads) != dims-2 || s.Strides != nil && len(s.Strides) != dims-2
	for i := 0; !bad && i < dims-2; i++ {
		bad = s.StrideAt(i) < 1 || s.PadAt(i) < 0
	}
	if bad {
		return nil, fmt.Errorf("cudnn: shape %+v: want input N,C,(D,)H,W and filter K,C,(T,)R,S of one rank, 4 or 5, the same C, "+
			"strides of 1 or more and no negative padding, one a spatial axis where given per axis", s)
	}
	out := []int{s.Input[0], s.Filter[0]}
	for i := 2; i < dims; i++ {
		o := (s.Input[i]+2*s.PadAt(i-2)-s.Filter[i])/s.StrideAt(i-2) + 1
		if s.Input[i]+2*s.PadAt(i-2) < s.Filter[i] || o < 1 {
			return nil, fmt.Errorf("cudnn: shape %+v: the filter is larger than the padded input", s)
		}
		out = append(out, o)
	}
	return out, nil
}

// Entry is cuDNN's results for one layer and pass.
type Entry struct {
	Layer string `json:"layer"`
	Pass  Pass   `json:"pass"`
	// Precision is the convolutions' (tf32, fp32, fp16 or bf16): a
	// Table's, where the entry is one of its rows.
	Precision string   `json:"precision,omitempty"`
	Shape     Shape    `json:"shape"`
	Results   []Result `json:"results"`
}

// Table is cuDNN's results for every convolution of a model, as a device
// run records them (and the tests read them from testdata).
type Table struct {
	// Note says where the table came from.
	Note string `json:"note,omitempty"`
	// Device, CUDNN and Precision say what it was measured on and with:
	// the GPU, the cuDNN library, the convolutions' data type (tf32, fp32,
	// fp16 or bf16).
	Device    string  `json:"device"`
	CUDNN     string  `json:"cudnn"`
	Precision string  `json:"precision"`
	Layers    []Entry `json:"layers"`
}

// Check reports the first row whose algorithm is not its pass's or whose
// name does not match its number, or a pass without rows.
func (t Table) Check() error {
	for _, e := range t.Layers {
		if e.Pass < 0 || e.Pass >= numPasses {
			return fmt.Errorf("%s: pass %d is none of %s", e.Layer, int(e.Pass), strings.Join(passNames[:], ", "))
		}
		if len(e.Results) == 0 {
			return fmt.Errorf("%s %s: no results", e.Layer, e.Pass)
		}
		for _, r := range e.Results {
			if n := AlgoName(e.Pass, r.Algo); n == "" || n != r.Name {
				return fmt.Errorf("%s %s: algorithm %d is named %q; %s's algorithm %d is %q", e.Layer, e.Pass, r.Algo, r.Name, e.Pass, r.Algo, n)
			}
		}
	}
	return nil
}

// Policy chooses each layer's algorithm per pass from cuDNN's results:
// the fastest that ran, needs at most WorkspaceBytes of workspace and,
// with Deterministic, is deterministic both by cuDNN's field and by its
// documentation (Nondeterministic).
type Policy struct {
	// WorkspaceBytes is config key cuda.workspace in bytes.
	WorkspaceBytes int64
	// Deterministic is config key cuda.deterministic.
	Deterministic bool
}

// ran reports a result that ran (status 0, a time).
func ran(r Result) bool { return r.Status == 0 && r.TimeMS >= 0 }

// allowed reports a result the policy's determinism admits at precision
// (the budget aside): it ran, under a math type the precision allows.
func (p Policy) allowed(pass Pass, precision string, r Result) bool {
	return ran(r) && mathAllowed(precision, r.MathType) && (!p.Deterministic || (r.Deterministic && !Nondeterministic(pass, r.Algo)))
}

// Admits reports whether the policy may choose r for pass at precision.
func (p Policy) Admits(pass Pass, precision string, r Result) bool {
	return p.allowed(pass, precision, r) && r.WorkspaceBytes >= 0 && r.WorkspaceBytes <= p.WorkspaceBytes
}

// faster orders results: less time, then less workspace, then the lower
// algorithm number, so that equal rows give the same choice every time.
func faster(a, b Result) bool {
	if a.TimeMS != b.TimeMS {
		return a.TimeMS < b.TimeMS
	}
	if a.WorkspaceBytes != b.WorkspaceBytes {
		return a.WorkspaceBytes < b.WorkspaceBytes
	}
	return a.Algo < b.Algo
}

// Choose is the fastest result of e the policy admits, or a *NoFitError.
func (p Policy) Choose(e Entry) (Result, error) {
	var best *Result
	smallest := int64(-1)
	for i, r := range e.Results {
		if !p.allowed(e.Pass, e.Precision, r) {
			continue
		}
		if smallest < 0 || r.WorkspaceBytes < smallest {
			smallest = r.WorkspaceBytes
		}
		if p.Admits(e.Pass, e.Precision, r) && (best == nil || faster(r, *best)) {
			best = &e.Results[i]
		}
	}
	if best == nil {
		return Result{}, &NoFitError{Layer: e.Layer, Pass: e.Pass, Policy: p, Smallest: smallest}
	}
	return *best, nil
}

// NoFitError is a layer's pass for which the policy admits no result.
type NoFitError struct {
	Layer  string
	Pass   Pass
	Policy Policy
	// Smallest is the least workspace of the results the policy's
	// determinism admits (the budget aside), -1 where none ran.
	Smallest int64
}

func (e *NoFitError) Error() string {
	kind := "cuDNN algorithm"
	if e.Policy.Deterministic {
		kind = "deterministic cuDNN algorithm"
	}
	if e.Smallest < 0 {
		alt := "cuda.conv: memunet computes it with memunet's kernels"
		if e.Policy.Deterministic {
			alt = "cuda.deterministic: false admits the nondeterministic ones (weights then differ run to run), or " + alt
		}
		return fmt.Sprintf("%s %s: no %s ran for this layer; %s", e.Layer, e.Pass, kind, alt)
	}
	mib := (e.Smallest + 1<<20 - 1) >> 20
	return fmt.Sprintf("%s %s: no %s fits cuda.workspace (%s); the smallest that would needs %s: set cuda.workspace to at least %d (MiB), or cuda.conv: memunet",
		e.Layer, e.Pass, kind, memory.FormatBytes(e.Policy.WorkspaceBytes), memory.FormatBytes(e.Smallest), mib)
}

// Choice is the algorithm chosen for one layer's pass.
type Choice struct {
	Layer string `json:"layer"`
	Pass  Pass   `json:"pass"`
	Result
}

// Plan is the algorithm of every layer's passes, and the workspace a run
// needs for them: the largest any one chosen algorithm takes, since the
// passes run one at a time on the compute stream and share it.
//
// Find's times vary run to run, and two deterministic algorithms give
// different bits, so a bit-exact resume needs the run's own Plan, not a
// new one: it belongs with the checkpoint (JSON, as here).
type Plan struct {
	Choices        []Choice `json:"choices"`
	WorkspaceBytes int64    `json:"workspace_bytes"`
}

// Plan chooses for every entry of t (Choose); its error joins every
// entry's *NoFitError.
func (p Policy) Plan(t Table) (Plan, error) {
	var plan Plan
	var errs []error
	for _, e := range t.Layers {
		e.Precision = t.Precision
		r, err := p.Choose(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		plan.Choices = append(plan.Choices, Choice{Layer: e.Layer, Pass: e.Pass, Result: r})
		plan.WorkspaceBytes = max(plan.WorkspaceBytes, r.WorkspaceBytes)
	}
	return plan, errors.Join(errs...)
}

// Buffers are one pass's device memory, as addresses. X is the
// convolution's input (dx, written, for BackwardData), W its filter (dw,
// written, for BackwardFilter), Y its output (written by Forward; dy, read,
// by the backward passes). Workspace is WorkspaceBytes of scratch, from
// the pool. Accumulate adds the result to what the written buffer holds
// (cuDNN's beta 1) instead of overwriting it (beta 0).
type Buffers struct {
	X, W, Y, Workspace uintptr
	WorkspaceBytes     int64
	Accumulate         bool
}
