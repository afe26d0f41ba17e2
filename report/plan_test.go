package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/train"
)

// TestPrintPlan: plan's table has a line per planned row, a row that could
// not be planned is a sentence below it, and the recommendation ends with
// --set flags a shell reads as they are (a list of levels quoted), or says
// that none fits.
func TestPrintPlan(t *testing.T) {
	yes, no := true, false
	base := config.Variant{MicroBatch: 4, Accumulate: 1, Precision: backend.Float32}
	levels := base
	levels.Checkpoint = config.Checkpoint{Levels: []int{0, 2}}
	rows := []train.PlanRow{
		{Name: "baseline", Variant: base, PeakAllocatedBytes: 8 << 20, PeakReservedBytes: 9 << 20, RelativeTime: 1, Fits: &no},
		{Name: "levels", Variant: levels, PeakAllocatedBytes: 3 << 20, PeakReservedBytes: 4 << 20, RelativeTime: 1.25, Fits: &yes},
		{Name: "bogus", Error: "variant bogus is unknown"},
	}
	// The table and the notes every case shares, before the reserved note.
	table := []string{
		"variant micro x acc precision checkpoint peak reserved est. time fits",
		"baseline 4 x 1 fp32 none 8.00 MiB 9.00 MiB 1.00x no",
		"levels 4 x 1 fp32 [0 2] 3.00 MiB 4.00 MiB 1.25x yes",
		"bogus: is unknown",
		"peak: allocated bytes at the most; --wide splits it by category and by phase.",
		"est. time: step time relative to baseline (FLOPs with recompute, 16-bit and accumulation costs).",
	}
	for _, c := range []struct {
		name  string
		table PlanTable
		want  []string // lines, in order, with fields separated by one space
	}{
		{"recommended", PlanTable{Capacity: 6 << 20, Recommended: "levels", Configured: base}, append(table,
			"reserved: the caching pool's memory at its most (pages or segments); capacity is checked on it.",
			"capacity 6.00 MiB: recommended levels, the fitting variant with the lowest estimated time;",
			"to train it, add to your command: --set 'model.checkpoint=[0,2]'",
		)},
		{"none fits", PlanTable{Capacity: 1 << 20, Arena: true, CapacityNote: "memory.capacity: auto is 1.00 MiB", Configured: base}, append(table,
			"reserved: the arena, one block where a dry run placed every buffer; capacity is checked on it.",
			"memory.capacity: auto is 1.00 MiB",
			"capacity 1.00 MiB: no variant fits; lower train.batch_size, data.resize or model.base",
		)},
		{"as configured", PlanTable{Capacity: 10 << 20, Recommended: "baseline", Configured: base}, []string{
			"capacity 10.00 MiB: recommended baseline, the fitting variant with the lowest estimated time:",
			"the configuration as it is",
		}},
	} {
		var b bytes.Buffer
		if err := PrintPlan(&b, rows, c.table); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		got := lines[max(0, len(lines)-len(c.want)):]
		for i := range got {
			got[i] = strings.Join(strings.Fields(got[i]), " ")
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: the output ends\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

// TestPrintPatchSuggestion: the suggestion names the patch, the capacity
// and its plan, then the next size's need or why there is none.
func TestPrintPatchSuggestion(t *testing.T) {
	row := train.PlanRow{Variant: config.Variant{MicroBatch: 2, Accumulate: 1, Precision: backend.Float16}, PeakReservedBytes: 3 << 20, PeakAllocatedBytes: 2 << 20}
	for _, c := range []struct {
		name string
		s    train.PatchSuggestion
		note string
		want string
	}{
		{"next", train.PatchSuggestion{Size: 64, Row: row, Next: 80, NextBytes: 5 << 20}, "",
			"data.patch: [64, 64] is the largest square patch that fits 4.00 MiB: planned peak 3.00 MiB reserved (2.00 MiB allocated), 2 x 1 micro-batches, fp16, checkpoint none\n" +
				"the next size, [80, 80], needs 5.00 MiB\n"},
		{"whole images", train.PatchSuggestion{Size: 96, Row: row, Limit: 96}, "memory.capacity: auto is 4.00 MiB",
			"memory.capacity: auto is 4.00 MiB\n" +
				"data.patch: [96, 96] is the largest square patch that fits 4.00 MiB: planned peak 3.00 MiB reserved (2.00 MiB allocated), 2 x 1 micro-batches, fp16, checkpoint none\n" +
				"it is the images' smaller side (96): a larger patch would only be padding\n"},
	} {
		var b bytes.Buffer
		if err := PrintPatchSuggestion(&b, c.s, 4<<20, c.note); err != nil || b.String() != c.want {
			t.Errorf("%s: %v\n%s\nwant\n%s", c.name, err, b.String(), c.want)
		}
	}
}

// TestPrintPlanNoneFitsVolumes: when nothing fits a 3D UNet, the advice
// names the key that sizes volumes, never data.resize (which they refuse).
func TestPrintPlanNoneFitsVolumes(t *testing.T) {
	no := false
	for _, tc := range []struct {
		source, want string
	}{{"synthetic", "data.size"}, {"nifti", "data.patch"}} {
		cfg := config.Default()
		cfg.Model.Dims, cfg.Data.Source = 3, tc.source
		rows := []train.PlanRow{{Name: "config", Variant: cfg.Variant(), PeakReservedBytes: 9 << 20, RelativeTime: 1, Fits: &no, Config: cfg}}
		var b bytes.Buffer
		if err := PrintPlan(&b, rows, PlanTable{Capacity: 1 << 20, Configured: cfg.Variant()}); err != nil {
			t.Fatal(err)
		}
		if want := "no variant fits; lower train.batch_size, " + tc.want + " or model.base"; !strings.Contains(b.String(), want) {
			t.Errorf("%s volumes: the plan ends\n%s\nwant %q", tc.source, b.String(), want)
		}
	}
}

// TestPrintPlanConvLibrary: where cuDNN computes the convolutions, plan
// says how many shapes it computes and the most workspace its algorithms
// take against cuda.workspace, lists each shape memunet's kernels compute
// instead with why, and with --wide each shape's algorithms.
func TestPrintPlanConvLibrary(t *testing.T) {
	conv := &train.ConvLibraryPlan{Library: "cuDNN 9.6.0 (CUDA 12.6) from /lib/libcudnn.so.9", BudgetBytes: 256 << 20, Choices: []cuda.LibraryChoice{
		{Shape: "conv 3x3 64->64 on 4x256x256 (pad 1)", Precision: "tf32", WorkspaceBytes: 9 << 20, Algorithms: []cudnn.Choice{
			{Pass: cudnn.Forward, Result: cudnn.Result{Name: "IMPLICIT_PRECOMP_GEMM", WorkspaceBytes: 9 << 20}},
			{Pass: cudnn.BackwardData, Result: cudnn.Result{Name: "ALGO_1"}},
			{Pass: cudnn.BackwardFilter, Result: cudnn.Result{Name: "ALGO_1", WorkspaceBytes: 1 << 20}},
		}},
		{Shape: "up-conv 2x2 128->64 on 4x128x128", Precision: "tf32", Fallback: "no deterministic cuDNN algorithm fits cuda.workspace"},
	}}
	rows := []train.PlanRow{{Name: "baseline", Variant: config.Variant{MicroBatch: 4, Accumulate: 1}, PeakAllocatedBytes: 8 << 20, RelativeTime: 1}}
	for _, wide := range []bool{false, true} {
		var b bytes.Buffer
		if err := PrintPlan(&b, rows, PlanTable{Wide: wide, Conv: conv}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		want := []string{
			"convolutions: cuDNN 9.6.0 (CUDA 12.6) from /lib/libcudnn.so.9 computes 1 of 2 shapes; its algorithms take at most 9.00 MiB of workspace for one pass, from the pool and in the peak (cuda.workspace 256.00 MiB)",
			"  up-conv 2x2 128->64 on 4x128x128 (tf32): memunet's kernels: no deterministic cuDNN algorithm fits cuda.workspace",
		}
		if wide {
			want = append(want, "  conv 3x3 64->64 on 4x256x256 (pad 1) (tf32): forward IMPLICIT_PRECOMP_GEMM 9.00 MiB, backward_data ALGO_1 0 bytes, backward_filter ALGO_1 1.00 MiB")
		} else {
			want = append(want, "--wide lists each convolution's algorithms")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("wide %v: the output does not say %q:\n%s", wide, w, out)
			}
		}
	}
}
