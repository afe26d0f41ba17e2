package cuda

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesUpToDate: the emulator's copies of the kernel sources
// are the sources, and, where nvcc is installed, the committed PTX is what
// go generate makes of them now.
func TestGeneratedFilesUpToDate(t *testing.T) {
	for _, name := range []string{"ops", "gemm"} {
		src, err := os.ReadFile(filepath.Join("kernels", name+".cu"))
		if err != nil {
			t.Fatal(err)
		}
		cp, err := os.ReadFile(filepath.Join("emu", name+"_cu.h"))
		if err != nil || !bytes.Equal(src, cp) {
			t.Errorf("emu/%s_cu.h is not kernels/%s.cu (%v): run go generate ./backend/cuda", name, name, err)
		}
	}
	if _, err := exec.LookPath("nvcc"); err != nil {
		t.Skip("no nvcc: the PTX is not regenerated here")
	}
	dir := t.TempDir()
	for _, c := range []struct{ name, flags string }{{"ops", "-fmad=false"}, {"gemm", "--extended-lambda"}} {
		out := filepath.Join(dir, c.name+".ptx")
		cmd := exec.Command("nvcc", "-ptx", "-arch=compute_80", "-O3", c.flags, "-o", out, filepath.Join("kernels", c.name+".cu"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nvcc %s.cu: %v\n%s", c.name, err, b)
		}
		got, _ := os.ReadFile(out)
		want, err := os.ReadFile(filepath.Join("kernels", c.name+".ptx"))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("kernels/%s.ptx is not what nvcc makes of kernels/%s.cu now: run go generate -tags cudagen ./backend/cuda", c.name, c.name)
		}
	}
}

// TestPTXAssembles: where ptxas is installed, the PTX assembles for the
// A100 (sm_80) and H100/H200 (sm_90) generations.
func TestPTXAssembles(t *testing.T) {
	if _, err := exec.LookPath("ptxas"); err != nil {
		t.Skip("no ptxas")
	}
	for _, name := range []string{"ops", "gemm"} {
		for _, arch := range []string{"sm_80", "sm_90"} {
			cmd := exec.Command("ptxas", "-arch="+arch, "-o", filepath.Join(t.TempDir(), "k.cubin"), filepath.Join("kernels", name+".ptx"))
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("ptxas -arch=%s %s.ptx: %v\n%s", arch, name, err, b)
			}
		}
	}
}
