//go:build cudaemu

package rundir

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/emu"
)

// TestGPUFaultStopsTheRun: a kernel fault on the GPU (emulated: a relu that
// writes past its output's end, planted into a resumed run) stops the run
// with one error line naming the kernel and its operation, with sync
// launches exactly and without them among the launches it lists (and
// the queued steps it came in, read together); the checkpoints saved
// before stay as they were and nothing more is saved.
func TestGPUFaultStopsTheRun(t *testing.T) {
	for _, syncLaunches := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", syncLaunches), func(t *testing.T) {
			cfg := resumeConfig("fp32")
			cfg.Train.Steps, cfg.Train.KeepLast = 4, 0
			dir := t.TempDir()
			mustRun(t, context.Background(), cfg, Options{OutDir: dir, backend: emuBackend(t, nil)}, nil)
			before := treeSums(t, filepath.Join(dir, "checkpoints"))
			cfg.Train.Steps = 8
			faulty := emuBackend(t, func(d *emu.Device) { d.Substitute(cuda.KReLU, emu.ReLUWritePastEnd) })
			faulty.SetSyncLaunches(syncLaunches)
			_, err := Run(context.Background(), cfg, Options{OutDir: dir, Resume: "auto", backend: faulty})
			if err == nil {
				t.Fatal("the run with a faulting kernel succeeded")
			}
			msg := err.Error()
			t.Log(msg)
			// Queued, the fault is known at a launch after it (step 5) or
			// where the steps are read (val_every 2: at 6), as the device
			// gets to it.
			inWindow := !syncLaunches && strings.HasPrefix(msg, "steps 5-6: cuda:emu: ")
			if strings.Contains(msg, "\n") || !(strings.HasPrefix(msg, "step 5: cuda:emu: ") || inWindow) ||
				!strings.Contains(msg, "kernel relu_write_past_end (in place of relu)") || !strings.Contains(msg, "relu (ReLU, grid ") {
				t.Errorf("the run's error does not name the kernel and its operation on one line: %s", msg)
			}
			if syncLaunches && !strings.HasPrefix(msg, "step 5: cuda:emu: kernel relu (ReLU, grid ") {
				t.Errorf("with sync launches the error does not start with the kernel: %s", msg)
			}
			if after := treeSums(t, filepath.Join(dir, "checkpoints")); after != before {
				t.Errorf("the checkpoints changed:\nbefore %s\nafter %s", before, after)
			}
		})
	}
}

// emuBackend is the CUDA backend on an emulated device, edited first.
func emuBackend(t *testing.T, edit func(*emu.Device)) *cuda.Backend {
	t.Helper()
	d := emu.New(1 << 30)
	if edit != nil {
		edit(d)
	}
	b, err := cuda.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// treeSums lists every file under dir with its sha256.
func treeSums(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %x\n", strings.TrimPrefix(p, dir), sha256.Sum256(raw))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
