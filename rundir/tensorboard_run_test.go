package rundir

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/runfiles"
)

// TestTensorBoardMatchesMetrics: a run writes RUN/tb event files whose
// every record's CRC verifies and whose scalars are metrics.jsonl's, each
// step once (no train/comm_ms alone), with the same pictures at each validation (four, or the first
// batch's when smaller); output.tensorboard: false writes none.
func TestTensorBoardMatchesMetrics(t *testing.T) {
	cfg := resumeConfig("fp16") // a loss scale that changes
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	images := sameAsMetrics(t, dir)
	// A run alone has no data-parallel communication to time (issue 49).
	if b, err := os.ReadFile(filepath.Join(dir, runfiles.Metrics)); err != nil || bytes.Contains(b, []byte("comm_ms")) {
		t.Errorf("a single-process run's %s holds comm_ms (or cannot be read: %v)", runfiles.Metrics, err)
	}
	n := min(tbPreviewImages, cfg.Train.BatchSize, 3) // 3 validation samples of 20
	if !maps.Equal(images, map[int]int{2: n, 4: n, 6: n}) {
		t.Errorf("pictures by step %v, want %d at each validation (2, 4, 6)", images, n)
	}

	cfg.Output.TensorBoard = false
	off := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: off}, nil)
	if _, err := os.Stat(filepath.Join(off, runfiles.TensorBoard)); !os.IsNotExist(err) {
		t.Errorf("output.tensorboard: false made %s: %v", runfiles.TensorBoard, err)
	}
}

// TestTensorBoardResumeEachStepOnce: a run resumed from an earlier
// checkpoint (step 2 of 6) rewrites steps 3-6; the event files then hold
// each step once, equal to the new metrics.jsonl, in two files.
func TestTensorBoardResumeEachStepOnce(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.KeepLast = 0
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	ck := filepath.Join(dir, runfiles.Checkpoints, runfiles.CheckpointName(2, 1))
	mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: ck}, nil)
	sameAsMetrics(t, dir)
	files, _ := filepath.Glob(filepath.Join(dir, runfiles.TensorBoard, "events.out.tfevents.*"))
	if len(files) != 2 {
		t.Errorf("event files %v, want the first run's and the resumed one's", files)
	}
}

// TestTensorBoardUnwritable: a tb that cannot be a folder (a file put in
// its place before a resume) gives one warning and the run finishes.
func TestTensorBoardUnwritable(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps = 4
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	tb := filepath.Join(dir, runfiles.TensorBoard)
	if err := os.RemoveAll(tb); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tb, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Steps, cfg.Output.Progress = 6, "plain"
	var progress bytes.Buffer
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: dir, Progress: &progress, Resume: "auto"}, nil)
	if sum.Steps != 6 {
		t.Fatalf("the run stopped at step %d", sum.Steps)
	}
	if n := strings.Count(progress.String(), "output.tensorboard:"); n != 1 {
		t.Errorf("%d warnings about output.tensorboard:\n%s", n, progress.String())
	}
}
