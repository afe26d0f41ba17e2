package cuda

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// kernelFile is a file of kernels/ and its copy in emu/.
type kernelFile struct{ source, copy string }

// kernelFiles are the kernel files (M.cu, copied as M_cu.h), then the
// headers they include (copied as they are).
func kernelFiles() []kernelFile {
	var fs []kernelFile
	for m := range NumModules {
		fs = append(fs, kernelFile{ModuleName(m) + ".cu", ModuleName(m) + "_cu.h"})
	}
	return append(fs, kernelFile{"half.h", "half.h"})
}

// TestGeneratedFilesUpToDate: the emulator's copies of the kernel sources
// are the sources; the fatbins were made from the sources as they are
// (kernels/fatbin.sum, written with them, holds the sources' sums: no nvcc
// needed); and, where nvcc is installed, the committed fatbins are what go
// generate -tags cudagen makes of them now, byte for byte.
func TestGeneratedFilesUpToDate(t *testing.T) {
	const regenerate = "run go generate -tags cudagen ./backend/cuda (nvcc: the CUDA toolkit)"
	sums, err := os.ReadFile(filepath.Join("kernels", "fatbin.sum"))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, f := range kernelFiles() {
		src, err := os.ReadFile(filepath.Join("kernels", f.source))
		if err != nil {
			t.Fatal(err)
		}
		cp, err := os.ReadFile(filepath.Join("emu", f.copy))
		if err != nil || !bytes.Equal(src, cp) {
			t.Errorf("emu/%s is not kernels/%s (%v): run go generate ./backend/cuda", f.copy, f.source, err)
		}
		fmt.Fprintf(&want, "%x  kernels/%s\n", sha256.Sum256(src), f.source)
	}
	if string(sums) != want.String() {
		t.Errorf("kernels/*.fatbin were made from other sources than kernels/*.cu (fatbin.sum:\n%s\nthe sources:\n%s): %s",
			sums, want.String(), regenerate)
	}
	if _, err := exec.LookPath("nvcc"); err != nil {
		t.Skip("no nvcc: the fatbins are not regenerated here")
	}
	dir := t.TempDir()
	for m := range NumModules {
		name := ModuleName(m)
		args := generateArgs(t, name)
		out := filepath.Join(dir, name+".fatbin")
		for i, a := range args {
			if a == "-o" {
				args[i+1] = out
			}
		}
		cmd := exec.Command(args[0], args[1:]...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, b)
		}
		got, _ := os.ReadFile(out)
		committed, err := os.ReadFile(filepath.Join("kernels", name+".fatbin"))
		if err != nil || !bytes.Equal(got, committed) {
			t.Errorf("kernels/%s.fatbin is not what nvcc makes of kernels/%s.cu now: %s", name, name, regenerate)
		}
	}
}

// generateArgs is cudagen.go's nvcc command for kernels/name.cu.
func generateArgs(t *testing.T, name string) []string {
	t.Helper()
	src, err := os.ReadFile("cudagen.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		if args, ok := strings.CutPrefix(line, "//go:generate nvcc "); ok && strings.HasSuffix(args, " kernels/"+name+".cu") {
			return append([]string{"nvcc"}, strings.Fields(args)...)
		}
	}
	t.Fatalf("cudagen.go has no nvcc line for kernels/%s.cu", name)
	return nil
}

// TestFatbinsHoldEveryGPU: where cuobjdump is installed, each embedded
// fatbin holds machine code for sm_80, sm_86, sm_89 and sm_90 and
// compute_80 PTX, and every kernel of its module for each, none spilling
// to local memory and each fitting a 256-thread block's registers.
func TestFatbinsHoldEveryGPU(t *testing.T) {
	if _, err := exec.LookPath("cuobjdump"); err != nil {
		t.Skip("no cuobjdump")
	}
	arches := []string{"sm_80", "sm_86", "sm_89", "sm_90"}
	usage := regexp.MustCompile(`(?m)^\s*Function (\w+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)`)
	for i := range NumModules {
		name, image := ModuleName(i), Fatbin(i)
		file := filepath.Join(t.TempDir(), name+".fatbin")
		if err := os.WriteFile(file, []byte(image), 0o644); err != nil {
			t.Fatal(err)
		}
		elf, _ := exec.Command("cuobjdump", "--list-elf", file).CombinedOutput()
		ptx, _ := exec.Command("cuobjdump", "--list-ptx", file).CombinedOutput()
		for _, arch := range arches {
			if !strings.Contains(string(elf), "."+arch+".cubin") {
				t.Errorf("%s.fatbin has no %s machine code:\n%s", name, arch, elf)
			}
		}
		if !strings.Contains(string(ptx), ".sm_80.ptx") {
			t.Errorf("%s.fatbin has no compute_80 PTX:\n%s", name, ptx)
		}
		for _, arch := range arches {
			out, err := exec.Command("cuobjdump", "--dump-resource-usage", "--gpu-architecture", arch, file).CombinedOutput()
			if err != nil {
				t.Fatalf("cuobjdump -res-usage %s: %v\n%s", arch, err, out)
			}
			found := map[string]bool{}
			for _, m := range usage.FindAllStringSubmatch(string(out), -1) {
				found[m[1]] = true
				regs, _ := strconv.Atoi(m[2])
				if m[3] != "0" || m[5] != "0" {
					t.Errorf("%s %s: stack %s, local %s bytes: it spills", arch, m[1], m[3], m[5])
				}
				if regs*BlockThreads > 65536 {
					t.Errorf("%s %s: %d registers a thread do not fit %d threads", arch, m[1], regs, BlockThreads)
				}
			}
			for k := range NumKernels {
				if k.Module() == i && !found[k.String()] {
					t.Errorf("%s.fatbin has no kernel %s for %s", name, k, arch)
				}
			}
		}
	}
}

// TestKernelsReachMemoryThroughGCAST: the kernels declare no raw pointer
// and no __shared__ array outside the macros the emulator checks (gptr,
// GCAST, SHARED: a raw one compiles for the host too, unchecked).
func TestKernelsReachMemoryThroughGCAST(t *testing.T) {
	raw := regexp.MustCompile(`\((const )?\w+ \*\)|__shared__|\b\w+ \*\w+\s*[=,;)]`)
	for _, f := range kernelFiles() {
		name := f.source
		src, err := os.ReadFile(filepath.Join("kernels", name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if strings.HasPrefix(code, "#define") || !raw.MatchString(code) {
				continue
			}
			t.Errorf("kernels/%s:%d reaches memory past the emulator's checks (use gptr, GCAST, SHARED): %s", name, i+1, strings.TrimSpace(line))
		}
	}
}

// TestTensorCoreMachineCode: where cuobjdump is installed, every kernel
// of tc.cu multiplies on the tensor cores (HMMA: TF32, fp16 and bf16
// variants) in the sm_80 and sm_90 machine code, and the TF32 ones copy
// their operands with cp.async (LDGSTS).
func TestTensorCoreMachineCode(t *testing.T) {
	if _, err := exec.LookPath("cuobjdump"); err != nil {
		t.Skip("no cuobjdump")
	}
	tc := KTcConvTf32.Module()
	file := filepath.Join(t.TempDir(), "tc.fatbin")
	if err := os.WriteFile(file, []byte(Fatbin(tc)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[Kernel][]string{
		KTcConvTf32:  {"HMMA.1684.F32.TF32", "LDGSTS"},
		KTcWgradTf32: {"HMMA.1684.F32.TF32", "LDGSTS"},
		KTcConv16:    {"HMMA.16816.F32 ", "HMMA.16816.F32.BF16"},
		KTcWgrad16:   {"HMMA.16816.F32 ", "HMMA.16816.F32.BF16"},
	}
	for _, arch := range []string{"sm_80", "sm_90"} {
		out, err := exec.Command("cuobjdump", "-sass", "-arch", arch, file).CombinedOutput()
		if err != nil {
			t.Fatalf("cuobjdump -sass %s: %v\n%.500s", arch, err, out)
		}
		sass := map[string]string{}
		for _, fn := range strings.Split(string(out), "Function : ")[1:] {
			name, code, _ := strings.Cut(fn, "\n")
			sass[strings.TrimSpace(name)] = code
		}
		for k := range NumKernels {
			if k.Module() != tc {
				continue
			}
			for _, op := range want[k] {
				if n := strings.Count(sass[k.String()], op); n == 0 {
					t.Errorf("%s %s has no %s", arch, k, strings.TrimSpace(op))
				} else {
					t.Logf("%s %s: %d %s", arch, k, n, strings.TrimSpace(op))
				}
			}
		}
	}
}

// TestTwoBlocksFatbin: where cuobjdump is installed, the occupancy
// experiment's image (TCBlocksEnv=2) holds every tensor-core kernel for
// each GPU at 128 registers or fewer, so that two 256-thread blocks fit an
// SM; its spills are logged, for the device check's figures to weigh.
func TestTwoBlocksFatbin(t *testing.T) {
	if _, err := exec.LookPath("cuobjdump"); err != nil {
		t.Skip("no cuobjdump")
	}
	t.Setenv(TCBlocksEnv, "2")
	file := filepath.Join(t.TempDir(), "tc2.fatbin")
	if err := os.WriteFile(file, []byte(Fatbin(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	usage := regexp.MustCompile(`(?m)^\s*Function (\w+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)`)
	for _, arch := range []string{"sm_80", "sm_86", "sm_89", "sm_90"} {
		out, err := exec.Command("cuobjdump", "--dump-resource-usage", "--gpu-architecture", arch, file).CombinedOutput()
		if err != nil {
			t.Fatalf("cuobjdump -res-usage %s: %v\n%s", arch, err, out)
		}
		found := 0
		for _, m := range usage.FindAllStringSubmatch(string(out), -1) {
			found++
			if regs, _ := strconv.Atoi(m[2]); regs*BlockThreads*2 > 65536 {
				t.Errorf("%s %s: %d registers a thread do not fit two blocks of %d threads", arch, m[1], regs, BlockThreads)
			}
			t.Logf("%s %s: %s registers, stack %s, local %s bytes", arch, m[1], m[2], m[3], m[5])
		}
		for k := range NumKernels {
			if k.Module() == 2 && !strings.Contains(string(out), "Function "+k.String()+":") {
				t.Errorf("tc2.fatbin has no kernel %s for %s", k, arch)
			}
		}
		if found == 0 {
			t.Errorf("tc2.fatbin: no kernel for %s", arch)
		}
	}
	if Fatbin(2) == tcFatbin {
		t.Error("with TCBlocksEnv=2 the default image is loaded")
	}
}
