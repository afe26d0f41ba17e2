package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/memunet/memunet/device"
)

// TestCommandsOpenNoDevice: the help of every command, version, config and
// a plan on the CPU never load the CUDA driver, so the gpu build answers
// them on a machine without one (only computing on cuda needs it). In the
// gpu build (go test -tags gpu -run TestCommandsOpenNoDevice ./cmd/memunet)
// it checks the dispatch itself; in the CPU build the driver is never
// loaded. It runs in a fresh process (this test binary again), since
// another test of the package may have opened a device.
func TestCommandsOpenNoDevice(t *testing.T) {
	if os.Getenv("MEMUNET_TEST_NO_DEVICE") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCommandsOpenNoDevice$", "-test.v")
		cmd.Env = append(os.Environ(), "MEMUNET_TEST_NO_DEVICE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	cases := [][]string{
		{"version"}, {"--version"}, {"help"}, {"--help"},
		{"config", "list"}, {"config", "print"}, {"config", "print", "baseline"},
		{"plan", "--config", "../../configs/quickstart.yaml", "--device", "cpu"},
		{"plan", "--config", "../../configs/quickstart.yaml", "--set", "device=cpu", "--variants", "baseline,fp16"},
	}
	for _, c := range commands {
		cases = append(cases, append(strings.Fields(c.name), "--help"), append([]string{"help"}, strings.Fields(c.name)...))
	}
	for _, args := range cases {
		if code, _, errOut := runOut(args...); code != 0 {
			t.Errorf("memunet %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		if device.DriverLoaded() {
			t.Fatalf("memunet %s loaded the CUDA driver", strings.Join(args, " "))
		}
	}
	// The check can fail: computing on cuda does load the driver (and, on a
	// machine without one, fails with the driver's reason).
	code, _, errOut := runOut("plan", "--config", "../../configs/quickstart.yaml", "--device", "cuda")
	if device.GPUBuild && !device.DriverLoaded() {
		t.Errorf("plan --device cuda (exit %d, %q) did not load the driver: this test cannot see a load", code, errOut)
	}
}
