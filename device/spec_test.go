package device

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
		err  string
	}{
		{"auto", Spec{Kind: Auto}, ""},
		{"", Spec{Kind: Auto}, ""},
		{"cpu", Spec{Kind: CPU}, ""},
		{"cuda", Spec{Kind: CUDA}, ""},
		{"cuda:0", Spec{Kind: CUDA}, ""},
		{"cuda:3", Spec{Kind: CUDA, Index: 3}, ""},
		{"cuda:-1", Spec{}, "device ordinal"},
		{"cuda:x", Spec{}, "device ordinal"},
		{"gpu", Spec{}, "must be auto, cpu, cuda or cuda:N"},
		{"CPU", Spec{}, "must be auto"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q): %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, _ := Parse(got.String()); back != got {
			t.Errorf("%q: String %q does not parse back", tc.in, got.String())
		}
	}
}

func TestOpen(t *testing.T) {
	b, err := Open(Spec{Kind: CPU})
	if err != nil || b.Name() != "cpu" || !strings.HasPrefix(Describe(b), "cpu (") {
		t.Fatalf("cpu: %v, %v", b, err)
	}
	if GPUBuild {
		t.Skip("the gpu build: cuda is tested on the device")
	}
	if b, err := Open(Spec{Kind: Auto}); err != nil || b.Name() != "cpu" {
		t.Errorf("auto in the CPU build: %v, %v", b, err)
	}
	_, err = Open(Spec{Kind: CUDA, Index: 1})
	if err == nil || !strings.Contains(err.Error(), "-tags gpu") || !strings.Contains(err.Error(), "device: cpu") {
		t.Errorf("cuda:1 in the CPU build: %v", err)
	}
}
