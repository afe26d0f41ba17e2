//go:build cudaemu

package rundir

import (
	"context"
	"testing"

	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
	"github.com/memunet/memunet/backend/cuda/emu"
)

// libraryBackend is the CUDA backend on an emulated device whose
// convolutions the stand-in cuDNN computes, as cuda.conv cudnn resolves
// it: one per run, as each process has its own.
func libraryBackend(t *testing.T) *cuda.Backend {
	t.Helper()
	d := emu.New(1 << 30)
	b, err := cuda.New(d)
	if err != nil {
		t.Fatal(err)
	}
	lib := emu.NewConvLibrary(d)
	b.UseConvLibrary(lib, cudnn.Policy{WorkspaceBytes: 256 << 20, Deterministic: true}, true)
	b.SetConvProvider(cuda.ConvProvider{Choice: "cudnn", CUDNN: lib.Name()})
	return b
}

// TestResumeWithConvLibraryBitExact: with a convolution library's
// deterministic algorithms (the stand-in cuDNN on the emulated GPU), 6
// steps straight give exactly the losses, weights, statistics and Adam
// state of 3 steps plus a resume to 6, in fp32 and fp16 (the grad scaler,
// the weight gradients staged in 16 bits); summary.json names the
// provider, each convolution's algorithms and the most workspace one took.
func TestResumeWithConvLibraryBitExact(t *testing.T) {
	for _, variant := range []string{"fp32", "fp16"} {
		t.Run(variant, func(t *testing.T) {
			cfg := resumeConfig(variant)
			straightDir := t.TempDir()
			straight := mustRun(t, context.Background(), cfg, Options{OutDir: straightDir, backend: libraryBackend(t)}, nil)
			if straight.Conv != "cudnn" || straight.ConvWorkspaceBytes <= 0 || len(straight.ConvChoices) == 0 {
				t.Fatalf("summary: conv %q, workspace %d, %d choices", straight.Conv, straight.ConvWorkspaceBytes, len(straight.ConvChoices))
			}
			for _, c := range straight.ConvChoices {
				if c.Fallback != "" || len(c.Algorithms) != 3 || c.WorkspaceBytes > straight.ConvWorkspaceBytes {
					t.Errorf("summary's choice %+v", c)
				}
			}
			dir := t.TempDir()
			c3 := cfg
			c3.Train.Steps = 3
			mustRun(t, context.Background(), c3, Options{OutDir: dir, backend: libraryBackend(t)}, nil)
			second := mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: "auto", backend: libraryBackend(t)}, nil)
			sameLosses(t, stepLosses(t, straightDir), stepLosses(t, dir))
			sameState(t, openCk(t, straight.LastCheckpoint), openCk(t, second.LastCheckpoint))
		})
	}
}
