package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/crossval"
)

// cvArgs cross-validates a tiny network on 30 synthetic 16x16 images in
// 5 folds of 8 steps, a checkpoint at step 4 and the end.
func cvArgs(out string) []string {
	return append([]string{"cv", "--config", "../../configs/quickstart.yaml", "--folds", "5", "--out", out}, "--set", "model.base=4", "--set", "model.depth=2",
		"--set", "data.size=16", "--set", "data.count=30", "--set", "train.batch_size=4", "--set", "train.steps=8",
		"--set", "train.val_every=4", "--set", "train.checkpoint_every=4")
}

// TestCV: memunet cv --folds 5 trains 5 folds into DIR/fold_K and writes cv.json
// with each fold's scores and their mean; run again, it trains nothing.
// Killed (SIGKILL) in the middle of the third fold (fold_2), then run
// again, it leaves folds 0 and 1 as they were, continues fold 2 from its
// checkpoint, trains folds 3 and 4, and
// writes the uninterrupted run's cv.json, byte for byte.
func TestCV(t *testing.T) {
	if testing.Short() {
		t.Skip("runs memunet processes")
	}
	whole := t.TempDir()
	out := runOK(t, cvArgs(whole)...)
	b, err := os.ReadFile(filepath.Join(whole, "cv.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cv crossval.CV
	if err := json.Unmarshal(b, &cv); err != nil {
		t.Fatal(err)
	}
	if cv.Folds != 5 || len(cv.Runs) != 5 || len(cv.Mean.ClassDice) != 4 || len(cv.Classes) != 4 {
		t.Fatalf("cv.json: %s", b)
	}
	sum := 0.0
	for k, r := range cv.Runs {
		if r.Fold != k || r.Dir != "fold_"+string(rune('0'+k)) || r.Steps != 8 {
			t.Errorf("fold %d: %+v", k, r)
		}
		sum += r.ValDice
	}
	if d := sum/5 - cv.Mean.ValDice; d*d > 1e-20 || cv.Std.ValDice <= 0 {
		t.Errorf("mean val_dice %v (folds' mean %v), std %v", cv.Mean.ValDice, sum/5, cv.Std.ValDice)
	}
	for _, want := range []string{"fold     steps   val_loss   val_miou   val_dice    miou_fg    dice_fg\n", "\nmean  ", "\nstd   ", "Dice      fold 0   fold 1   fold 2   fold 3   fold 4     mean      std\n", "files: " + filepath.Join(whole, "cv.json")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	before := filesIn(t, whole)
	if again := runOK(t, cvArgs(whole)...); strings.Count(again, "finished already") != 5 || !reflect.DeepEqual(filesIn(t, whole), before) {
		t.Errorf("cv again trained or changed something:\n%s", again)
	}

	// Killed once fold 2 has saved step 4: the fifth save (two a fold).
	cut := t.TempDir()
	t.Setenv("MEMUNET_TEST_HANG_AFTER_SAVES", "5")
	p := startMemunet(t, false, cvArgs(cut)...)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(cut, "fold_2", "checkpoints", "step-00000004", "manifest.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fold 2 saved no checkpoint: %s", p.stderr.String())
		}
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	if code := p.wait(t); code != -1 {
		t.Fatalf("exit %d after SIGKILL", code)
	}
	os.Unsetenv("MEMUNET_TEST_HANG_AFTER_SAVES")
	if _, err := os.Stat(filepath.Join(cut, "fold_2", "summary.json")); err == nil {
		t.Fatal("fold 2 finished before the kill")
	}
	done := func() []map[string]string {
		return []map[string]string{filesIn(t, filepath.Join(cut, "fold_0")), filesIn(t, filepath.Join(cut, "fold_1"))}
	}
	kept := done()
	stamp := func() time.Time {
		st, err := os.Stat(filepath.Join(cut, "fold_1", "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	was := stamp()
	var stdout, stderr bytes.Buffer
	if code := run(cvArgs(cut), &stdout, &stderr); code != 0 {
		t.Fatalf("cv after the kill: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"cv: fold 0 of 5: finished already (8 steps)", "cv: fold 1 of 5: finished already (8 steps)",
		"cv: fold 2 of 5: resuming " + filepath.Join(cut, "fold_2", "checkpoints", "step-00000004")} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if !reflect.DeepEqual(done(), kept) {
		t.Errorf("fold 0 or 1 changed")
	}
	if !stamp().Equal(was) {
		t.Errorf("fold_1/summary.json was written again")
	}
	resumed, err := os.ReadFile(filepath.Join(cut, "cv.json"))
	if err != nil || !bytes.Equal(resumed, b) {
		t.Errorf("cv.json after the resume (%v):\n%s\nthe uninterrupted one:\n%s", err, resumed, b)
	}
}
