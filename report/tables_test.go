package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memunet/memunet/bench"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/train"
)

// TestTables: each text table has its header and a line per entry, in
// order; what is missing is said or left out, never a zero passed off as a
// measurement.
func TestTables(t *testing.T) {
	iou, dice := 0.5, 2.0/3
	runs := []Curves{
		{Steps: []float64{1, 2, 3, 4}, ValSteps: []float64{2, 4}, MIoU: []float64{0.7, 0.6}},
		{Steps: []float64{1, 2}},
	}
	for _, c := range []struct {
		name  string
		print func(*bytes.Buffer)
		lines []string // what each line holds, in order (fields separated by spaces)
	}{
		{"phases", func(b *bytes.Buffer) {
			PrintPhaseTable(b, map[string]map[string]int64{
				"optimizer": {"params": 1024, "total": 3 << 20},
				"forward":   {"activations": 2 << 20, "total": 5 << 20},
			})
		}, []string{"peak params grads optimizer activations workspace total", "forward 0 bytes 0 bytes 0 bytes 2.00 MiB 0 bytes 5.00 MiB",
			"optimizer 1.00 KiB 0 bytes 0 bytes 0 bytes 0 bytes 3.00 MiB"}},
		{"classes", func(b *bytes.Buffer) {
			PrintClassTable(b, []metrics.ClassScore{{Class: 0, IoU: &iou, Dice: &dice, TargetPixels: 10, PredictedPixels: 12}, {Class: 1}})
		}, []string{"class IoU Dice target px predicted px", "0 0.5000 0.6667 10 12", "1 absent - 0 0 (in neither masks nor predictions: not in the means)"}},
		{"named classes", func(b *bytes.Buffer) {
			PrintClassTable(b, []metrics.ClassScore{{Class: 0, Name: "sky", IoU: &iou, Dice: &dice, TargetPixels: 10, PredictedPixels: 12}, {Class: 1, Name: "road"}})
		}, []string{"class IoU Dice target px predicted px", "0 sky 0.5000 0.6667 10 12", "1 road absent - 0 0 (in neither masks nor predictions: not in the means)"}},
		{"no classes", func(b *bytes.Buffer) { PrintClassTable(b, nil) }, nil},
		{"validations", func(b *bytes.Buffer) { PrintValidationTable(b, []string{"a", "b"}, runs) },
			[]string{"run steps validations last val miou best val miou at step", "a 4 2 0.6000 0.7000 2", "b 2 0 - - -"}},
		{"bench", func(b *bytes.Buffer) {
			PrintBench(b, bench.Result{PeakSamples: []float64{150, 200, 210}, Kernel: "avx2", Cores: 2, Rows: []bench.Row{
				{Name: "config", BenchRow: train.BenchRow{Variant: "4 x 1", StepMS: 12.34, StepMSMin: 12, StepMSMax: 15.55, GFLOPs: 50, ConvGFLOPs: 80, KindMS: [model.NumKinds]float64{1, 2, 3, 4, 5, 6, 7, 8}, OptimizerMS: 0.25, OtherMS: 0.04, LoopWaitMS: 1.5}},
				{Name: "bogus", Error: "unknown variant"}}})
		}, []string{"variant micro x acc step ms min..max GFLOP/s % peak conv % peak conv forward conv backward norm relu pooling upsampling loss conversions optimizer other",
			"config 4 x 1 12.3 12.0..15.6 50.0 24 38 1.0 2.0 3.0 4.0 5.0 6.0 7.0 8.0 0.2 0.0", "bogus unknown variant",
			"step ms: the median timed step, min..max the fastest and slowest; per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.",
			"conv % peak: the convolutions' FLOPs over their own time (conv forward + conv backward), of the peak.",
			"% peak: of the FMA peak's best, 210.0 GFLOP/s, of 3 samples taken between the variants (150.0..210.0, median 200.0; avx2 micro-kernel from L1 on 2 cores): load only slows a sample",
			"unsteady: the peak's samples differ by 1.40x, so this machine's speed changed while the bench ran (another process, or the host's other guests): compare variants within one run, or use --repeat.",
			"loop wait per optimizer step, the calling core idle at the parallel loops' ends until the other cores finish (imbalance, or a core the host took away): config 1.5 ms (12%)."}},
		{"bench past the arithmetic", func(b *bytes.Buffer) {
			PrintBench(b, bench.Result{PeakSamples: []float64{100, 105}, Kernel: "avx2", Cores: 2, Rows: []bench.Row{
				{Name: "baseline", BenchRow: train.BenchRow{Variant: "4 x 1", StepMS: 1, StepMSMin: 1, StepMSMax: 1, GFLOPs: 99, ConvGFLOPs: 130}},
				{Name: "bf16", BenchRow: train.BenchRow{Variant: "4 x 1", StepMS: 1, StepMSMin: 1, StepMSMax: 1, GFLOPs: 200, ConvGFLOPs: 230, Winograd: true}}}})
		}, []string{"variant micro x acc step ms min..max GFLOP/s % peak conv % peak conv forward conv backward norm relu pooling upsampling loss conversions optimizer other",
			"baseline 4 x 1 1.0 1.0..1.0 99.0 94 ? 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0",
			"bf16 4 x 1 1.0 1.0..1.0 200.0 190 219 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0",
			"step ms: the median timed step, min..max the fastest and slowest; per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.",
			"conv % peak: the convolutions' FLOPs over their own time (conv forward + conv backward), of the peak.",
			"% peak: of the FMA peak's best, 105.0 GFLOP/s, of 2 samples taken between the variants (100.0..105.0, median 105.0; avx2 micro-kernel from L1 on 2 cores): load only slows a sample",
			"GFLOP/s counts every 3x3 convolution's direct FLOPs; where model.conv_algo (auto, winograd) takes Winograd's way it multiplies up to 4x fewer, so % peak can pass 100.",
			"?: more than the arithmetic allows of the peak's best sample: the machine was slower while the peak was sampled than while the steps ran.",
			"unsteady: the peak's samples differ by 1.05x, so this machine's speed changed while the bench ran (another process, or the host's other guests): compare variants within one run, or use --repeat."}},
		{"bench without a peak", func(b *bytes.Buffer) {
			PrintBench(b, bench.Result{Rows: []bench.Row{{Name: "fp16", BenchRow: train.BenchRow{Variant: "2 x 2", StepMS: 1, StepMSMin: 1, StepMSMax: 1, GFLOPs: 3}}}})
		}, []string{"variant micro x acc step ms min..max GFLOP/s % peak conv % peak conv forward conv backward norm relu pooling upsampling loss conversions optimizer other",
			"fp16 2 x 2 1.0 1.0..1.0 3.0 - - 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0",
			"step ms: the median timed step, min..max the fastest and slowest; per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.",
			"conv % peak: the convolutions' FLOPs over their own time (conv forward + conv backward), of the peak."}},
		{"bench on a counting device", func(b *bytes.Buffer) {
			PrintBench(b, bench.Result{Rows: []bench.Row{{Name: "fp16", BenchRow: train.BenchRow{Variant: "4 x 1", StepMS: 2, StepMSMin: 2, StepMSMax: 2, GFLOPs: 3, Counted: true, LaunchesPerStep: 412, CopiesPerStep: 0.1, SyncsPerStep: 0.1, StepsPerRead: 10}}}})
		}, []string{"variant micro x acc step ms min..max GFLOP/s % peak conv % peak conv forward conv backward norm relu pooling upsampling loss conversions optimizer other",
			"fp16 4 x 1 2.0 2.0..2.0 3.0 - - 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0",
			"step ms: the median timed step, min..max the fastest and slowest; per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.",
			"conv % peak: the convolutions' FLOPs over their own time (conv forward + conv backward), of the peak.",
			"device work per optimizer step, mean over the timed steps:",
			"fp16: 412.0 kernel launches, 0.1 blocking copies to the host, 0.0 blocking uploads, 0.1 waits for all work (steps queue on the device, read once every 10: output.log_every)"}},
		{"bench with Winograd", func(b *bytes.Buffer) {
			PrintBench(b, bench.Result{PeakSamples: []float64{100}, Kernel: "avx512", Cores: 2, Rows: []bench.Row{{Name: "baseline", BenchRow: train.BenchRow{Variant: "4 x 1", StepMS: 1, StepMSMin: 1, StepMSMax: 1, GFLOPs: 110, Winograd: true}}}})
		}, []string{"variant micro x acc step ms min..max GFLOP/s % peak conv % peak conv forward conv backward norm relu pooling upsampling loss conversions optimizer other",
			"baseline 4 x 1 1.0 1.0..1.0 110.0 110 - 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0",
			"step ms: the median timed step, min..max the fastest and slowest; per-kind columns: ms per optimizer step, mean over the timed steps; other = data, gradient sums and bookkeeping.",
			"conv % peak: the convolutions' FLOPs over their own time (conv forward + conv backward), of the peak.",
			"% peak: of the FMA peak's best, 100.0 GFLOP/s, of 1 samples taken between the variants (100.0..100.0, median 100.0; avx512 micro-kernel from L1 on 2 cores): load only slows a sample",
			"GFLOP/s counts every 3x3 convolution's direct FLOPs; where model.conv_algo (auto, winograd) takes Winograd's way it multiplies up to 4x fewer, so % peak can pass 100."}},
		{"bench repeats", func(b *bytes.Buffer) {
			row := func(name string, ms float64) bench.Row {
				return bench.Row{Name: name, BenchRow: train.BenchRow{StepMS: ms, LoopWaitMS: ms / 10}}
			}
			PrintBenchRepeats(b, []bench.Result{
				{PeakSamples: []float64{500}, Rows: []bench.Row{row("config", 52.7), row("fp16", 60)}},
				{PeakSamples: []float64{490, 510}, Rows: []bench.Row{row("config", 78.2), row("fp16", 61)}},
				{Rows: []bench.Row{row("config", 55), {Name: "fp16", Error: "out of memory"}}},
				{PeakSamples: []float64{300, 510}, Rows: []bench.Row{row("config", 90), row("fp16", 62)}}})
		}, []string{"process config fp16 peak GFLOP/s peak spread loop wait", "1 52.7 60.0 500.0 1.00 10%", "2 78.2 61.0 510.0 1.04 10%", "3 55.0 - - - 10%", "4 90.0 62.0 510.0 1.70! 10%",
			"loop wait: of the median steps, the time the calling core sat idle at the parallel loops' ends until the other cores finished (imbalance, or a core the host took away).",
			"unsteady: in 1 of 4 processes the peak's samples differ by more than 1.10x (!), so the machine's speed changed while they ran: its steps do not say which process was faster.",
			"step ms (the median step of each process), over 4 processes:",
			"config: fastest 52.7, median 78.2, slowest 90.0 (slowest/fastest 1.71)",
			"fp16: fastest 60.0, median 61.0, slowest 62.0 (slowest/fastest 1.03)"}},
	} {
		var b bytes.Buffer
		c.print(&b)
		got := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		if b.Len() == 0 {
			got = nil
		}
		if len(got) != len(c.lines) {
			t.Errorf("%s: %d lines, want %d:\n%s", c.name, len(got), len(c.lines), b.String())
			continue
		}
		for i, line := range got {
			if f := strings.Join(strings.Fields(line), " "); f != c.lines[i] {
				t.Errorf("%s: line %d is %q, want %q", c.name, i, f, c.lines[i])
			}
		}
	}
}
