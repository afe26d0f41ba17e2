package runfiles

import "testing"

func TestCheckpointName(t *testing.T) {
	for _, tc := range []struct {
		step, seq int
		name      string
	}{{0, 1, "step-00000000"}, {12, 1, "step-00000012"}, {12, 0, "step-00000012"}, {12, 3, "step-00000012-3"}, {123456789, 1, "step-123456789"}} {
		if got := CheckpointName(tc.step, tc.seq); got != tc.name {
			t.Errorf("CheckpointName(%d, %d) = %q, want %q", tc.step, tc.seq, got, tc.name)
		}
		step, seq, ok := ParseCheckpointName(tc.name)
		if !ok || step != tc.step || seq != max(tc.seq, 1) {
			t.Errorf("ParseCheckpointName(%q) = %d, %d, %v", tc.name, step, seq, ok)
		}
	}
	for _, bad := range []string{"", "step-", "step-1234567", "step-0000001x", "step-00000012-", "step-00000012-x", "step-00000012-1-2", ".tmp-step-00000012", "Step-00000012", "step-+0000012"} {
		if _, _, ok := ParseCheckpointName(bad); ok {
			t.Errorf("ParseCheckpointName(%q) accepted", bad)
		}
	}
}

func TestExportName(t *testing.T) {
	for _, tc := range []struct{ prec, format, want string }{
		{"fp32", "safetensors", "model-step-00000042.safetensors"},
		{"fp16", "onnx", "model-step-00000042-fp16.onnx"},
	} {
		if got := ExportName(42, tc.prec, tc.format); got != tc.want {
			t.Errorf("ExportName(42, %q, %q) = %q, want %q", tc.prec, tc.format, got, tc.want)
		}
	}
}
