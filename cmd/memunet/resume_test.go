package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestFinishedRunStaysFinished: --resume auto on a run at its last step
// says so and changes no file (every file, the lock file included, byte
// for byte); raising train.steps continues it, each validation recorded
// once, and the "done:" line says which part it ran.
func TestFinishedRunStaysFinished(t *testing.T) {
	dir := t.TempDir()
	runOK(t, append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", dir}, tinyArgs...)...)
	before := filesIn(t, dir)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"train", "--resume", "auto", "--out", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := dir + " already finished: 4/4 steps; to train further raise train.steps\n"; stdout.String() != want {
		t.Errorf("output %q, want %q", stdout.String(), want)
	}
	if after := filesIn(t, dir); !reflect.DeepEqual(after, before) {
		for name := range after {
			if after[name] != before[name] {
				t.Errorf("%s changed", name)
			}
		}
		t.Fatalf("a resume of a finished run changed the run directory")
	}

	out := runOK(t, "train", "--resume", "auto", "--out", dir, "--set", "train.steps=6")
	if !strings.Contains(out, "done: 6 steps, 2 of them in this part (from step 4) in ") || !strings.Contains(out, "in all parts") {
		t.Errorf("the continued run's done line:\n%s", out)
	}
	sum := ckSummary(t, dir)
	if sum.Steps != 6 || sum.PartSteps != 2 || sum.PartFromStep != 4 || sum.WallSeconds <= sum.PartWallSeconds || sum.StepMSMedian == 0 {
		t.Errorf("summary: %d steps, part %d from %d, %.3fs of %.3fs, median %v ms", sum.Steps, sum.PartSteps, sum.PartFromStep,
			sum.PartWallSeconds, sum.WallSeconds, sum.StepMSMedian)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if n := strings.Count(string(b), `"type":"val"`); n != 3 {
		t.Errorf("metrics.jsonl has %d validations, want 3 (steps 2, 4, 6)", n)
	}
}

// filesIn is every file under dir, its contents (a link: its target).
func filesIn(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[p] = "-> " + target
			return err
		case !d.IsDir():
			b, err := os.ReadFile(p)
			out[p] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
