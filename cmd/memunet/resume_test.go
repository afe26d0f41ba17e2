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
// for byte); the command it suggests, which raises train.steps, continues
// it, each validation recorded once, and the "done:" line says which part
// it ran.
func TestFinishedRunStaysFinished(t *testing.T) {
	dir := t.TempDir()
	runOK(t, append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", dir}, tinyArgs...)...)
	before := filesIn(t, dir)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"train", "--resume", "auto", "--out", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := dir + " already finished: 4/4 steps; to train further raise train.steps, e.g. go run ./cmd/memunet train "
	hint, ok := strings.CutPrefix(stdout.String(), want)
	if !ok {
		t.Fatalf("output %q, want it to start %q", stdout.String(), want)
	}
	if after := filesIn(t, dir); !reflect.DeepEqual(after, before) {
		for name := range after {
			if after[name] != before[name] {
				t.Errorf("%s changed", name)
			}
		}
		t.Fatalf("a resume of a finished run changed the run directory")
	}

	// The hint is a command to paste: it trains the run further.
	out := runOK(t, append([]string{"train"}, strings.Fields(hint)...)...)
	if !strings.Contains(out, "done: 8 steps, 4 of them in this part (from step 4) in ") || !strings.Contains(out, "in all parts") {
		t.Errorf("the continued run's done line:\n%s", out)
	}
	sum := ckSummary(t, dir)
	if sum.Steps != 8 || sum.PartSteps != 4 || sum.PartFromStep != 4 || sum.WallSeconds <= sum.PartWallSeconds || sum.StepMSMedian == 0 {
		t.Errorf("summary: %d steps, part %d from %d, %.3fs of %.3fs, median %v ms", sum.Steps, sum.PartSteps, sum.PartFromStep,
			sum.PartWallSeconds, sum.WallSeconds, sum.StepMSMedian)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if n := strings.Count(string(b), `"type":"val"`); n != 4 {
		t.Errorf("metrics.jsonl has %d validations, want 4 (steps 2, 4, 6, 8)", n)
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
