package rundir

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/safetensors"
	"github.com/memunet/memunet/train"
)

// resumeConfig is a tiny run whose 6 steps cross an epoch boundary (17
// training samples: 4 optimizer steps per epoch).
func resumeConfig(variant string) config.Config {
	c := config.Default()
	c.Model.Base, c.Model.Depth, c.Model.Classes = 4, 2, 4
	c.Data.Size, c.Data.Count = 16, 20
	c.Train.BatchSize, c.Train.Steps, c.Train.ValEvery = 4, 6, 2
	c.Train.CheckpointEvery, c.Train.KeepLast = 2, 2
	c.Output.Progress = "none"
	switch variant {
	case "fp16":
		c.Train.Precision = backend.Float16
		c.Train.Scaler.GrowthInterval = 2 // the scale changes during the 6 steps
	case "accum4":
		c.Train.BatchSize, c.Train.Accumulate = 1, 4
	case "cosine":
		c.Train.Schedule.Kind, c.Train.Schedule.Warmup = "cosine", 2
	case "augment":
		c.Data.Flip = true
		c.Data.Augment = data.Augment{VFlip: true, Rot90: true, CropScale: []float64{0.5, 1}, Brightness: 0.2, Contrast: 0.2}
	case "sgd": // a momentum buffer per parameter, started from the first gradient
		c.Train.Optimizer, c.Train.LR, c.Train.Momentum, c.Train.Nesterov, c.Train.WeightDecay = "sgd", 0.05, 0.9, true, 1e-3
	case "nnunet": // configs/nnunet2d.yaml's optimization: the poly schedule, clipping that bites
		c.Train.Optimizer, c.Train.LR, c.Train.Momentum, c.Train.Nesterov, c.Train.WeightDecay = "sgd", 0.01, 0.99, true, 3e-5
		c.Train.Schedule.Kind, c.Train.ClipGradNorm = "poly", 0.5
	case "rmsprop": // milesial's: square average and momentum buffer
		c.Train.Optimizer, c.Train.LR, c.Train.Momentum, c.Train.WeightDecay = "rmsprop", 1e-4, 0.999, 1e-8
	case "ce+dice": // the loss's per-batch class sums feed its gradient
		c.Train.Loss = config.Loss{Kind: "ce+dice", ClassWeights: config.ClassWeights{Auto: true}, DiceSmooth: 1}
	case "focal":
		c.Train.Loss = config.Loss{Kind: "focal", Gamma: 2, ClassWeights: config.ClassWeights{Values: []float64{1, 2, 0.5, 1}}}
	case "checkpoint auto": // chosen again on resume, the same levels
		row, err := train.PlanConfig(c)
		if err != nil {
			panic(err)
		}
		c.Model.Checkpoint, c.Memory.Capacity = config.Checkpoint{Auto: true}, config.ByteSize(row.PeakReservedBytes*9/10)
	case "adamw":
		c.Train.Optimizer, c.Train.WeightDecay = "adamw", 0.1
	case "patch": // random crops drawn from (train.seed, epoch, sample), flipped
		c.Data.Patch, c.Data.PatchForeground, c.Data.Flip = []int{8, 8}, 0.5, true
	case "plateau":
		// A threshold no improvement meets: every validation after the
		// first decays the rate, so the state a checkpoint carries matters.
		c.Train.Schedule.Kind, c.Train.Schedule.Patience, c.Train.Schedule.Threshold, c.Train.Schedule.Factor = "plateau", 0, 10, 0.5
	}
	return c
}

// runOpts runs Run with a test hook on the trainer it builds.
func runOpts(t *testing.T, ctx context.Context, cfg config.Config, opts Options, hook func(*train.Trainer)) (*Summary, error) {
	t.Helper()
	opts.onTrainer = hook
	return Run(ctx, cfg, opts)
}

func mustRun(t *testing.T, ctx context.Context, cfg config.Config, opts Options, hook func(*train.Trainer)) *Summary {
	t.Helper()
	sum, err := runOpts(t, ctx, cfg, opts, hook)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// gradNorms reads the grad_norm of metrics.jsonl's steps that have one,
// in order.
func gradNorms(t *testing.T, dir string) []float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for line := range strings.Lines(string(raw)) {
		var r struct {
			Type     string   `json:"type"`
			GradNorm *float64 `json:"grad_norm"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type == "step" && r.GradNorm != nil {
			out = append(out, *r.GradNorm)
		}
	}
	return out
}

// stepLosses reads the step losses of metrics.jsonl, in order.
func stepLosses(t *testing.T, dir string) []float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r struct {
			Type string  `json:"type"`
			Step int     `json:"step"`
			Loss float64 `json:"loss"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type == "step" {
			if r.Step != len(out)+1 {
				t.Fatalf("metrics.jsonl: step %d after %d steps", r.Step, len(out))
			}
			out = append(out, r.Loss)
		}
	}
	return out
}

func openCk(t *testing.T, dir string) *checkpoint.Checkpoint {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// sameState compares two checkpoints' tensors bit for bit and their
// optimizer, scaler and data position.
func sameState(t *testing.T, a, b *checkpoint.Checkpoint) {
	t.Helper()
	for _, pair := range [][2]*safetensors.File{{a.Model, b.Model}, {a.Optimizer, b.Optimizer}} {
		if len(pair[0].Tensors) != len(pair[1].Tensors) {
			t.Fatalf("%d tensors vs %d", len(pair[0].Tensors), len(pair[1].Tensors))
		}
		for i, x := range pair[0].Tensors {
			if y := pair[1].Tensors[i]; x.Name != y.Name || !bytes.Equal(x.Data, y.Data) {
				t.Errorf("tensor %s differs", x.Name)
			}
		}
	}
	ma, mb := a.Manifest, b.Manifest
	if ma.Step != mb.Step || ma.Adam != mb.Adam || ma.Scaler != mb.Scaler || ma.Position != mb.Position || ma.RNG != mb.RNG {
		t.Errorf("state differs:\n%+v %+v %+v %+v\n%+v %+v %+v %+v", ma.Adam, ma.Scaler, ma.Position, ma.RNG, mb.Adam, mb.Scaler, mb.Position, mb.RNG)
	}
	if !reflect.DeepEqual(ma.Metrics.Steps, mb.Metrics.Steps) {
		t.Errorf("loss history differs:\n%v\n%v", ma.Metrics.Steps, mb.Metrics.Steps)
	}
}

func sameLosses(t *testing.T, want, got []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d step losses, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Errorf("step %d: loss %v after resuming, %v straight", i+1, got[i], want[i])
		}
	}
}

// TestResumeBitExact: 6 steps straight give exactly the losses, weights,
// BatchNorm statistics, Adam moments and scaler state of 3 steps plus a
// resume to 6, for fp32, fp16 with the grad scaler and 1x4 accumulation;
// both when the first run ends at step 3 and when SIGINT stops it in the
// middle of step 3's accumulation cycle.
func TestResumeBitExact(t *testing.T) {
	for _, variant := range []string{"fp32", "fp16", "accum4", "cosine", "plateau", "augment", "sgd", "nnunet", "rmsprop", "adamw", "ce+dice", "focal", "checkpoint auto", "patch"} {
		t.Run(variant, func(t *testing.T) {
			cfg := resumeConfig(variant)
			straightDir := t.TempDir()
			straight := mustRun(t, context.Background(), cfg, Options{OutDir: straightDir}, nil)
			want := stepLosses(t, straightDir)
			wantCk := openCk(t, straight.LastCheckpoint)
			if variant == "fp16" && (wantCk.Manifest.Scaler.Scale == cfg.Train.Scaler.InitScale || !wantCk.Manifest.Scaler.Enabled) {
				t.Fatalf("the scaler never changed (%+v): the test would not cover its state", wantCk.Manifest.Scaler)
			}
			if state := map[string]string{"sgd": ".momentum_buffer", "rmsprop": ".square_avg", "adamw": ".exp_avg_sq"}[variant]; state != "" {
				n := 0
				for _, tn := range wantCk.Optimizer.Tensors {
					if strings.HasSuffix(tn.Name, state) {
						n++
					}
				}
				if n == 0 || wantCk.Manifest.Adam.Kind != cfg.Train.Optimizer {
					t.Fatalf("the checkpoint holds %d %s tensors for optimizer %q: the test would not cover its state", n, state, wantCk.Manifest.Adam.Kind)
				}
			}
			if variant == "nnunet" {
				if norms := gradNorms(t, straightDir); len(norms) != 6 || slices.Max(norms) <= cfg.Train.ClipGradNorm {
					t.Fatalf("grad_norm in metrics.jsonl: %v; want 6, some above train.clip_grad_norm %g (the test would not cover clipping)", norms, cfg.Train.ClipGradNorm)
				}
			}
			if wantCk.Manifest.Epoch != 2 {
				t.Fatalf("6 steps end in epoch %d, want 2 (crossing an epoch boundary)", wantCk.Manifest.Epoch)
			}

			t.Run("3 steps then resume", func(t *testing.T) {
				if cfg.Train.Schedule.Kind == "poly" {
					// Every rate of a poly schedule depends on train.steps: a
					// 3-step run is another schedule (the interrupt below is not).
					t.Skip("a poly schedule's rates change with train.steps")
				}
				dir := t.TempDir()
				c3 := cfg
				c3.Train.Steps = 3
				first := mustRun(t, context.Background(), c3, Options{OutDir: dir}, nil)
				if m := openCk(t, first.LastCheckpoint).Manifest; m.Step != 3 || m.Request.Reason != "end" {
					t.Fatalf("first run's checkpoint: step %d, reason %s", m.Step, m.Request.Reason)
				}
				second := mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: "auto"}, nil)
				if second.ResumedFrom != first.LastCheckpoint || second.Steps != 6 {
					t.Errorf("resumed from %q to step %d", second.ResumedFrom, second.Steps)
				}
				sameLosses(t, want, stepLosses(t, dir))
				sameState(t, wantCk, openCk(t, second.LastCheckpoint))
				if second.ValMIoU != straight.ValMIoU || second.FinalLoss != straight.FinalLoss {
					t.Errorf("summary: val miou %v, final loss %v; straight %v, %v", second.ValMIoU, second.FinalLoss, straight.ValMIoU, straight.FinalLoss)
				}
			})

			t.Run("interrupted mid-cycle", func(t *testing.T) {
				dir := t.TempDir()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				steps := 0
				hook := func(tr *train.Trainer) {
					// The "signal" arrives after step 3's backward passes,
					// before its optimizer update: in the middle of the cycle.
					tr.AfterBackward = func() {
						if steps++; steps == 3 {
							cancel()
						}
					}
				}
				first := mustRun(t, ctx, cfg, Options{OutDir: dir}, hook)
				if !first.Interrupted || first.Steps != 3 {
					t.Fatalf("interrupted %v after %d steps, want after 3", first.Interrupted, first.Steps)
				}
				m := openCk(t, first.LastCheckpoint).Manifest
				if m.Step != 3 || m.Request.Reason != "interrupt" || !m.Request.MidCycle || !strings.Contains(m.Request.Note, "at its end") ||
					m.Position.CyclePosition != 0 || m.Position.MicroBatches != 3*cfg.Train.Accumulate {
					t.Fatalf("interrupt checkpoint: step %d, request %+v, position %+v", m.Step, m.Request, m.Position)
				}
				second := mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: "auto"}, nil)
				sameLosses(t, want, stepLosses(t, dir))
				sameState(t, wantCk, openCk(t, second.LastCheckpoint))
			})
		})
	}
}

// TestResumeAutoWithoutCheckpoint starts from scratch.
func TestResumeAutoWithoutCheckpoint(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps = 2
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir(), Resume: "auto"}, nil)
	if sum.ResumedFrom != "" || sum.Steps != 2 || sum.LastCheckpoint == "" {
		t.Errorf("summary %+v", sum)
	}
}

// TestRetention: the newest keep_last checkpoints and the best by val_miou
// are kept, the others removed; nothing temporary is left.
func TestRetention(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery, cfg.Train.KeepLast, cfg.Train.ValEvery = 9, 1, 2, 3
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	list, err := checkpoint.ListRun(filepath.Join(dir, runfiles.Checkpoints))
	if err != nil {
		t.Fatal(err)
	}
	ck := openCk(t, filepath.Join(dir, runfiles.Checkpoints, runfiles.CheckpointName(9, 1)))
	bestVal, bestStep := -1.0, 0
	for _, v := range ck.Manifest.Metrics.Val {
		if v.ValMIoU > bestVal {
			bestVal, bestStep = v.ValMIoU, v.Step
		}
	}
	t.Logf("best val miou %.4f at step %d", bestVal, bestStep)
	want := []int{8, 9}
	if bestStep < 8 {
		want = []int{bestStep, 8, 9}
	}
	var steps []int
	for _, e := range list {
		steps = append(steps, e.Step)
		if _, err := checkpoint.Open(e.Path); err != nil {
			t.Error(err)
		}
	}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("kept steps %v, want %v (best val miou %.4f at step %d)", steps, want, bestVal, bestStep)
	}
	des, _ := os.ReadDir(filepath.Join(dir, runfiles.Checkpoints))
	if len(des) != len(want) {
		t.Errorf("checkpoints directory holds %d entries, want %d", len(des), len(want))
	}
}

// snapshotDir is every file under dir and its contents, but the lock file,
// which records the last process that held the folder.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != outdir.LockName {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

// TestResumeRefusals: a flipped byte, a truncated file, a missing file and a
// different architecture are each refused with their own message; the
// refused run changes nothing in the checkpoints directory, so a good
// checkpoint beside the refused one is still there, byte for byte.
func TestResumeRefusals(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery = 4, 2
	base := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: base}, nil)
	good := filepath.Join(base, runfiles.Checkpoints, runfiles.CheckpointName(2, 1))
	newest := filepath.Join(base, runfiles.Checkpoints, runfiles.CheckpointName(4, 1))
	for _, p := range []string{good, newest} {
		openCk(t, p)
	}
	bigger := cfg
	bigger.Model.Base = 8

	for _, tc := range []struct {
		name   string
		damage func(run string)
		cfg    config.Config
		kind   error
		want   []string
	}{
		{"flipped byte", func(run string) {
			flipByte(t, filepath.Join(run, runfiles.Checkpoints, runfiles.CheckpointName(4, 1), runfiles.Model), 200)
		},
			cfg, checkpoint.ErrCorrupt, []string{"model.safetensors is corrupt: its SHA-256 is", "the previous checkpoint", "verifies"}},
		{"truncated", func(run string) {
			os.Truncate(filepath.Join(run, runfiles.Checkpoints, runfiles.CheckpointName(4, 1), runfiles.Optimizer), 100)
		},
			cfg, checkpoint.ErrTruncated, []string{"optimizer.safetensors is truncated: 100 bytes, the manifest says"}},
		{"missing file", func(run string) {
			os.Remove(filepath.Join(run, runfiles.Checkpoints, runfiles.CheckpointName(4, 1), runfiles.Model))
		},
			cfg, checkpoint.ErrMissing, []string{"model.safetensors is missing"}},
		{"different architecture", func(string) {}, bigger, checkpoint.ErrMismatch,
			[]string{"different architecture", "model.base: checkpoint 4, now 8", "tensors differ, e.g. inc.double_conv.0.weight: checkpoint [4 3 3 3], model [8 3 3 3]",
				"or train the new model into another --out DIR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			copyTree(t, base, run)
			tc.damage(run)
			before := snapshotDir(t, filepath.Join(run, runfiles.Checkpoints))
			c := tc.cfg
			c.Train.Steps = 8
			_, err := runOpts(t, context.Background(), c, Options{OutDir: run, Resume: "auto"}, nil)
			var ce *checkpoint.Error
			if !errors.As(err, &ce) || !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want a %v refusal", err, tc.kind)
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
			if after := snapshotDir(t, filepath.Join(run, runfiles.Checkpoints)); !reflect.DeepEqual(before, after) {
				t.Error("the refused resume changed the checkpoints directory")
			}
			if _, err := checkpoint.Open(filepath.Join(run, runfiles.Checkpoints, runfiles.CheckpointName(2, 1))); err != nil {
				t.Errorf("good checkpoint no longer opens: %v", err)
			}
		})
	}

	// Other keys than the architecture: refused, naming the key and what may change.
	c := cfg
	c.Train.LR = 0.01
	_, err := runOpts(t, context.Background(), c, Options{OutDir: t.TempDir(), Resume: newest}, nil)
	if !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "train.lr: checkpoint 0.003, now 0.01") ||
		!strings.Contains(err.Error(), "train.steps") {
		t.Errorf("changed lr: %v", err)
	}

	// Restore itself checks the tensors against the trainer's model.
	ck := openCk(t, newest)
	tr := testTrainer(t, bigger)
	if err := Restore(tr, ck, false); !errors.Is(err, checkpoint.ErrMismatch) || !strings.Contains(err.Error(), "[4 3 3 3], model [8 3 3 3]") {
		t.Errorf("Restore into another architecture: %v", err)
	}
}

// TestResumeFromOlderKeepsNewer: resuming explicitly from an older
// checkpoint continues under new names; the newer checkpoint of the same
// steps is not replaced, and auto then picks the newest written.
func TestResumeFromOlderKeepsNewer(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery, cfg.Train.KeepLast = 4, 2, 0
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	ckDir := filepath.Join(dir, runfiles.Checkpoints)
	old4 := snapshotDir(t, filepath.Join(ckDir, runfiles.CheckpointName(4, 1)))
	second := mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: filepath.Join(ckDir, runfiles.CheckpointName(2, 1))}, nil)
	if filepath.Base(second.LastCheckpoint) != runfiles.CheckpointName(4, 2) {
		t.Errorf("continuation saved as %s", second.LastCheckpoint)
	}
	if !reflect.DeepEqual(old4, snapshotDir(t, filepath.Join(ckDir, runfiles.CheckpointName(4, 1)))) {
		t.Error("the earlier step-4 checkpoint changed")
	}
	latest, err := checkpoint.Latest(ckDir)
	if err != nil || latest != second.LastCheckpoint {
		t.Errorf("latest %s, %v", latest, err)
	}
	sameState(t, openCk(t, filepath.Join(ckDir, runfiles.CheckpointName(4, 1))), openCk(t, latest))
}

func flipByte(t *testing.T, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if d.Type()&os.ModeSymlink != 0 { // the run's "best" link
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPruneKeepsBest: with keep_last 2, the checkpoint of the best
// validation survives beside the newest two; without keep_best it goes.
func TestPruneKeepsBest(t *testing.T) {
	for _, keepBest := range []bool{true, false} {
		c := resumeConfig("fp32")
		c.Train.KeepLast, c.Train.KeepBest = 2, keepBest
		tr := testTrainer(t, c)
		parent := filepath.Join(t.TempDir(), runfiles.Checkpoints)
		ck := &checkpointer{tr: tr, parent: parent, lastSaved: -1, ctx: context.Background()}
		for step := 1; step <= 6; step++ {
			switch step {
			case 2:
				ck.validated(checkpoint.ValRecord{Type: "val", Step: 2, Validation: metrics.Validation{ValMIoU: 0.9}})
			case 4:
				ck.validated(checkpoint.ValRecord{Type: "val", Step: 4, Validation: metrics.Validation{ValMIoU: 0.5}})
			}
			if err := ck.save(step, 1, "every"); err != nil {
				t.Fatal(err)
			}
		}
		list, _ := checkpoint.List(parent)
		var steps []int
		for _, e := range list {
			steps = append(steps, e.Step)
		}
		want := []int{5, 6}
		if keepBest {
			want = []int{2, 5, 6}
		}
		if !reflect.DeepEqual(steps, want) {
			t.Errorf("keep_best %v: kept %v, want %v", keepBest, steps, want)
		}
	}
}

// testTrainer builds a trainer for c, closed when the test ends.
func testTrainer(t *testing.T, c config.Config) *train.Trainer {
	t.Helper()
	tr, err := train.NewTrainer(c, train.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// TestResumeAfterInterruptKeepsItsValidation: the validation an interrupt
// takes (after saving its checkpoint) is the latest one the resume names,
// enters the resumed history once, and metrics.jsonl holds each
// validation once; the summary's wall time covers both parts. A resume
// interrupted before its first step leaves summary.json and metrics.jsonl
// as they were.
func TestResumeAfterInterruptKeepsItsValidation(t *testing.T) {
	cfg := resumeConfig("fp32")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	steps := 0
	first := mustRun(t, ctx, cfg, Options{OutDir: dir}, func(tr *train.Trainer) {
		tr.AfterBackward = func() {
			if steps++; steps == 3 {
				cancel()
			}
		}
	})
	if !first.Interrupted || first.Steps != 3 {
		t.Fatalf("interrupted %v at step %d", first.Interrupted, first.Steps)
	}

	// Interrupted again before its first step: nothing changes.
	before := snapshotDir(t, dir)
	done, stop := context.WithCancel(context.Background())
	stop()
	again := mustRun(t, done, cfg, Options{OutDir: dir, Resume: "auto"}, nil)
	if !again.Interrupted || again.Steps != 3 {
		t.Errorf("the idle resume: interrupted %v at step %d", again.Interrupted, again.Steps)
	}
	after := snapshotDir(t, dir)
	for _, name := range []string{"summary.json", "metrics.jsonl"} {
		p := filepath.Join(dir, name)
		if after[p] != before[p] {
			t.Errorf("a resume that ran no step rewrote %s", name)
		}
	}

	var log bytes.Buffer
	plain := cfg
	plain.Output.Progress = "plain"
	second := mustRun(t, context.Background(), plain, Options{OutDir: dir, Resume: "auto", Progress: &log}, nil)
	if want := fmt.Sprintf("last val miou %.4f (step 3)", first.ValMIoU); !strings.Contains(log.String(), want) {
		t.Errorf("the resume note does not give the interrupt's validation %q:\n%s", want, log.String())
	}
	var valSteps []int
	for _, v := range openCk(t, second.LastCheckpoint).Manifest.Metrics.Val {
		valSteps = append(valSteps, v.Step)
	}
	if !reflect.DeepEqual(valSteps, []int{2, 3, 4, 6}) {
		t.Errorf("the resumed history's validations are at steps %v, want [2 3 4 6]", valSteps)
	}
	curves, err := ReadCurves(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(curves.ValSteps, []float64{2, 3, 4, 6}) {
		t.Errorf("metrics.jsonl validates at steps %v, want [2 3 4 6]", curves.ValSteps)
	}
	if second.PartFromStep != 3 || second.PartSteps != 3 || second.WallSeconds <= second.PartWallSeconds {
		t.Errorf("summary: part from %d, %d steps, %.3fs of %.3fs in all", second.PartFromStep, second.PartSteps, second.PartWallSeconds, second.WallSeconds)
	}
}

// TestPatchPlanMatchesMeasuredPeak: a data.patch run, whose validation
// takes whole images by tiles (the validation phase is the largest with
// tiles larger than the patch), measures the peaks its plan predicts,
// allocated and reserved, for every variant and both allocators.
func TestPatchPlanMatchesMeasuredPeak(t *testing.T) {
	for _, alloc := range []string{"arena", "caching"} {
		for _, tile := range []int{0, 16} {
			base := resumeConfig("patch")
			base.Data.Size, base.Memory.Allocator, base.Predict.Tile = 24, alloc, tile
			base.Train.Steps = 2
			rows, _, err := train.Plan(base, append([]string{"config"}, train.VariantNames()...), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rows {
				name := fmt.Sprintf("%s/tile %d/%s", alloc, tile, row.Name)
				if row.Error != "" {
					t.Errorf("%s: %s", name, row.Error)
					continue
				}
				if tile == 16 && row.Name == "config" && row.PeakByPhase[train.PhaseValidation] != row.PeakAllocatedBytes {
					t.Errorf("%s: validation's peak %d is not the run's %d: the test would not see the tiles", name, row.PeakByPhase[train.PhaseValidation], row.PeakAllocatedBytes)
				}
				sum, err := Run(context.Background(), row.Config, Options{OutDir: t.TempDir()})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if sum.PeakAllocatedBytes != row.PeakAllocatedBytes || sum.PeakReservedBytes != row.PeakReservedBytes {
					t.Errorf("%s: planned peak %d (reserved %d), measured %d (%d)", name, row.PeakAllocatedBytes, row.PeakReservedBytes, sum.PeakAllocatedBytes, sum.PeakReservedBytes)
				}
			}
		}
	}
}
