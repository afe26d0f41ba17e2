package crossval

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
)

func tinyInvocation() config.Invocation {
	return config.Invocation{Config: "../configs/quickstart.yaml", Sets: []string{"model.base=4", "model.depth=2", "data.size=16", "data.count=12",
		"train.batch_size=4", "train.steps=6", "train.val_every=3", "train.checkpoint_every=3", "output.tensorboard=false"}}
}

// cancelAt is a progress writer that cancels a context once a line holds
// a string.
type cancelAt struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	at     string
	cancel context.CancelFunc
}

func (c *cancelAt) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if c.at != "" && strings.Contains(c.buf.String(), c.at) {
		c.cancel()
	}
	return len(p), nil
}

// TestRunInterrupted: cancelled in fold 1 (as a signal stops train), Run
// says so and writes no cv.json; run again it reads fold 0, resumes fold
// 1 and writes the cv.json of a run never stopped.
func TestRunInterrupted(t *testing.T) {
	whole := t.TempDir()
	res, err := Run(context.Background(), Options{Dir: whole, Folds: 2, Invocation: tinyInvocation()})
	if err != nil || res.Interrupted || len(res.Runs) != 2 {
		t.Fatalf("%v %+v", err, res)
	}
	want, err := os.ReadFile(res.File)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelAt{at: filepath.Join(dir, runfiles.FoldDir(1), runfiles.Checkpoints, runfiles.CheckpointName(3, 1)), cancel: cancel}
	res, err = Run(ctx, Options{Dir: dir, Folds: 2, Invocation: tinyInvocation(), Run: rundir.Options{Progress: w}})
	if err != nil || !res.Interrupted || res.Stopped != 1 || len(res.Runs) != 1 || res.Summary.Steps >= 6 {
		t.Fatalf("cancelled in fold 1: %v %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(dir, runfiles.CrossValidation)); err == nil {
		t.Error("an interrupted cross-validation wrote cv.json")
	}
	var notes []string
	res, err = Run(context.Background(), Options{Dir: dir, Folds: 2, Invocation: tinyInvocation(), Note: func(s string) { notes = append(notes, s) }})
	if err != nil || res.Interrupted {
		t.Fatalf("%v %+v", err, res)
	}
	if got, err := os.ReadFile(res.File); err != nil || !bytes.Equal(got, want) {
		t.Errorf("cv.json after the resume (%v):\n%s\nwant:\n%s", err, got, want)
	}
	if len(notes) != 4 || !strings.HasPrefix(notes[0], "cv: fold 0 of 2: finished already (6 steps)") || !strings.HasPrefix(notes[2], "cv: fold 1 of 2: resuming ") {
		t.Errorf("notes:\n%s", strings.Join(notes, "\n"))
	}
}

// TestStatistics: means and sample standard deviations over the folds; a
// class in no fold's masks or predictions has none, one in some folds
// those folds'.
func TestStatistics(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	var cv CV
	for k, d := range []float64{0.5, 0.7, 0.9} {
		sum := &rundir.Summary{Steps: 10}
		sum.ValLoss, sum.ValDice = metrics.Loss(d), d
		sum.PerClass = []metrics.ClassScore{{Dice: f(d)}, {}, {Dice: f(1)}}
		if k == 0 {
			sum.PerClass[2].Dice = nil
		}
		cv.add(k, sum, []string{"bg"})
	}
	cv.finish()
	if math.Abs(cv.Mean.ValDice-0.7) > 1e-12 || math.Abs(cv.Std.ValDice-0.2) > 1e-12 || math.Abs(float64(cv.Std.ValLoss)-0.2) > 1e-12 {
		t.Errorf("mean %v std %v (loss std %v), want 0.7 and 0.2", cv.Mean.ValDice, cv.Std.ValDice, cv.Std.ValLoss)
	}
	if cv.Mean.ClassDice[1] != nil || *cv.Mean.ClassDice[2] != 1 || *cv.Std.ClassDice[2] != 0 || cv.Classes[0] != "bg" || cv.Classes[2] != "class 2" {
		t.Errorf("classes %v, means %v %v", cv.Classes, cv.Mean.ClassDice[1], cv.Mean.ClassDice[2])
	}
	var out strings.Builder
	cv.Print(&out)
	if !strings.Contains(out.String(), "class 1        -        -        -        -        -\n") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestRunRefusesATrainRun: a --out that holds a train run's files is
// refused before any fold trains, naming the files and the fix.
func TestRunRefusesATrainRun(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"config", runfiles.Config},
		{"summary", runfiles.Summary},
		{"checkpoints", filepath.Join(runfiles.Checkpoints, "step-00000004", runfiles.Manifest)},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, tc.file)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Run(context.Background(), Options{Dir: dir, Folds: 2, Invocation: tinyInvocation()})
		if err == nil || !strings.Contains(err.Error(), dir+" already holds a run") || !strings.Contains(err.Error(), "memunet cv would mix") ||
			!strings.Contains(err.Error(), "choose another --out DIR") {
			t.Errorf("%s: %v", tc.name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, runfiles.FoldDir(0))); err == nil {
			t.Errorf("%s: fold_0 was trained", tc.name)
		}
	}
}

// TestRunFoldsOutOfRange: a fold count outside 2..1000 is refused naming
// --folds and the range, before the folder is made.
func TestRunFoldsOutOfRange(t *testing.T) {
	for _, k := range []int{-1, 0, 1, 1001, math.MaxInt} {
		dir := filepath.Join(t.TempDir(), "cv")
		_, err := Run(context.Background(), Options{Dir: dir, Folds: k, Invocation: tinyInvocation()})
		if err == nil || !strings.Contains(err.Error(), "cv: --folds "+strconv.Itoa(k)+" (data.folds): want the number of folds, 2 to 1000, e.g. 5") {
			t.Errorf("%d folds: %v", k, err)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%d folds: made %s", k, dir)
		}
	}
}
