//go:build mpi

package rundir

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/outdir"
)

// TestDataParallelRun runs under mpirun -np 2 (.ci/run): a 2-rank run of
// 6 steps, and one of 3 steps resumed to 6, write the same losses and
// checkpoints, bit for bit, from rank 0 alone (the other rank writes
// nothing in the run directory, and rank 0 holds its lock); rank 0's summary has the world size and
// each rank's peak memory; one process cannot resume a 2-rank checkpoint.
func TestDataParallelRun(t *testing.T) {
	comm, err := dist.Open()
	if err != nil {
		t.Fatal(err)
	}
	if comm.Size() < 2 {
		t.Skip("run with mpirun -np 2")
	}
	defer comm.Close()
	cfg := resumeConfig("fp32")
	cfg.Data.Count = 40
	// Both ranks must use the same directories: rank 0 makes them and
	// broadcasts nothing but their names' shared root.
	root := filepath.Join(os.TempDir(), "memunet-dp-test")
	if comm.Rank() == 0 {
		os.RemoveAll(root)
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := comm.Barrier(); err != nil {
		t.Fatal(err)
	}
	straightDir, resumedDir := filepath.Join(root, "straight"), filepath.Join(root, "resumed")
	straight := mustRun(t, context.Background(), cfg, Options{OutDir: straightDir, Comm: comm}, nil)
	c3 := cfg
	c3.Train.Steps = 3
	mustRun(t, context.Background(), c3, Options{OutDir: resumedDir, Comm: comm}, nil)
	second := mustRun(t, context.Background(), cfg, Options{OutDir: resumedDir, Resume: "auto", Comm: comm}, nil)
	if err := comm.Barrier(); err != nil {
		t.Fatal(err)
	}
	if comm.Rank() != 0 {
		return
	}
	sameLosses(t, stepLosses(t, straightDir), stepLosses(t, resumedDir))
	sameState(t, openCk(t, straight.LastCheckpoint), openCk(t, second.LastCheckpoint))
	if straight.World != comm.Size() || len(straight.Ranks) != comm.Size() || straight.Ranks[1].PeakAllocatedBytes == 0 {
		t.Errorf("summary: world %d, ranks %+v", straight.World, straight.Ranks)
	}
	if m := openCk(t, straight.LastCheckpoint).Manifest; m.World != comm.Size() {
		t.Errorf("manifest world size %d", m.World)
	}
	// Rank 0 held the run directory (its lock file records the last holder).
	var holder outdir.Holder
	if b, err := os.ReadFile(filepath.Join(straightDir, outdir.LockName)); err != nil || json.Unmarshal(b, &holder) != nil || holder.PID != os.Getpid() {
		t.Errorf("the run directory's lock: %+v (%v), want rank 0's pid %d", holder, err, os.Getpid())
	}
	// One process refuses the 2-rank checkpoint, naming the size.
	_, err = Run(context.Background(), cfg, Options{OutDir: straightDir, Resume: "auto"})
	if err == nil || !strings.Contains(err.Error(), "trained by 2 process(es)") {
		t.Errorf("one process resuming a 2-rank run: %v", err)
	}
	os.RemoveAll(root)
}
