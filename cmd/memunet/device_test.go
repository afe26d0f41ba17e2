package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memunet/memunet/device"
)

// TestDeviceFlag: --device picks the backend (the banner and summary.json
// say which); asking the CPU build for cuda says how to get the gpu build,
// before anything is written; a bad name is refused naming the key.
func TestDeviceFlag(t *testing.T) {
	dir := t.TempDir() + "/run"
	args := append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", dir, "--device", "cpu", "--set", "output.progress=none"}, tinyArgs...)
	out := runOK(t, args...)
	if !strings.Contains(out, ", on cpu (") {
		t.Errorf("banner does not name the device: %s", out)
	}
	if sum := ckSummary(t, dir); !strings.HasPrefix(sum.Device, "cpu (") {
		t.Errorf("summary.json device %q", sum.Device)
	}
	if device.GPUBuild {
		return
	}
	for _, cmd := range [][]string{
		{"train", "--config", "../../configs/quickstart.yaml", "--out", t.TempDir() + "/run", "--device", "cuda"},
		{"plan", "--config", "../../configs/quickstart.yaml", "--device", "cuda:1"},
		{"train", "--config", "../../configs/quickstart.yaml", "--out", t.TempDir() + "/run", "--set", "device=cuda"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(cmd, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "this memunet is the CPU build") || !strings.Contains(stderr.String(), "-tags gpu") {
			t.Errorf("%v: exit %d, %q", cmd, code, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plan", "--config", "../../configs/quickstart.yaml", "--device", "tpu"}, &stdout, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "device") || !strings.Contains(stderr.String(), "must be auto, cpu, cuda or cuda:N") {
		t.Errorf("--device tpu: exit %d, %q", code, stderr.String())
	}
}
