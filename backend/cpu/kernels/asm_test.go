package kernels

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// vectorRegister matches an operand naming an SSE, AVX or AVX-512 register.
var vectorRegister = regexp.MustCompile(`\b[XYZ]([0-9]|[12][0-9]|3[01])\b`)

// mnemonic matches an instruction's name (a macro's is lower case).
var mnemonic = regexp.MustCompile(`^[A-Z][A-Z0-9]*$`)

// TestAsmIsVEXOnly: every instruction of this package's assembly that
// touches a vector register is VEX or EVEX encoded (its mnemonic starts
// with V). A legacy SSE instruction (MOVL AX, X0 is SSE2's MOVD) between
// AVX instructions, with the upper halves of the Y registers in use, costs
// a state transition each time: on a 2-core AMD EPYC (Zen 3, KVM) the
// ReLU mask's backward ran at 0.58 GB/s with one in its loop and 60 GB/s
// with VMOVD, and the seed UNet's step took 215 ms against 124.
func TestAsmIsVEXOnly(t *testing.T) {
	files, err := filepath.Glob("*_amd64.[sh]")
	if err != nil || len(files) == 0 {
		t.Fatalf("no assembly found: %v", err)
	}
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if c := strings.Index(line, "//"); c >= 0 {
				line = line[:c]
			}
			// A macro's body holds several instructions a line.
			for _, ins := range strings.Split(strings.TrimSuffix(strings.TrimSpace(line), `\`), ";") {
				fields := strings.Fields(ins)
				if len(fields) < 2 || !mnemonic.MatchString(fields[0]) {
					continue
				}
				if !vectorRegister.MatchString(strings.Join(fields[1:], " ")) {
					continue
				}
				checked++
				if !strings.HasPrefix(fields[0], "V") {
					t.Errorf("%s:%d: %s is legacy SSE on a vector register: use its VEX form (MOVL or MOVQ with an X register is VMOVD or VMOVQ)", f, i+1, strings.TrimSpace(ins))
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d vector instructions found: the scan is broken", checked)
	}
}
