package rundir

import (
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

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/train"
)

// TestExistingRunRefused: a new run into a directory that holds one is
// refused, naming the directory and the ways on, and changes nothing; with
// Force it deletes the earlier run's files, says so, and starts over.
func TestExistingRunRefused(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery = 2, 1
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	before := snapshotDir(t, dir)

	other := cfg
	other.Train.Steps, other.Train.LR = 3, 0.01
	other.Output.Progress = "plain"
	_, err := Run(context.Background(), other, Options{OutDir: dir})
	var ex *ExistingRunError
	if !errors.As(err, &ex) {
		t.Fatalf("a second run into %s: %v, want an *ExistingRunError", dir, err)
	}
	for _, want := range []string{dir, "config.yaml", "metrics.jsonl", "checkpoints/ (2 entries)", "--resume auto", "--out", "--force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if after := snapshotDir(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("the refused run changed the directory")
	}

	var log bytes.Buffer
	sum, err := Run(context.Background(), other, Options{OutDir: dir, Force: true, Progress: &log})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "--force: deleted the earlier run in "+dir+": config.yaml, split.json, metrics.jsonl, summary.json, checkpoints/ (2 entries)") {
		t.Errorf("--force did not say what it deleted: %q", log.String())
	}
	if sum.Steps != 3 || len(stepLosses(t, dir)) != 3 {
		t.Errorf("after --force: %d steps, metrics.jsonl has %d, want 3 and 3 (no earlier records)", sum.Steps, len(stepLosses(t, dir)))
	}
	list, _ := checkpoint.ListRun(filepath.Join(dir, runfiles.Checkpoints))
	for _, e := range list {
		if e.Step < 2 {
			t.Errorf("the earlier run's checkpoint %s survived --force", e.Path)
		}
	}
	if got := readConfig(t, dir).Train.LR; got != 0.01 {
		t.Errorf("config.yaml has lr %v, want the new run's 0.01", got)
	}
}

func readConfig(t *testing.T, dir string) config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRefusedRunWritesNothing: a run refused by validation, by the plan
// under memory.capacity, by a bad dataset or by a mismatching checkpoint
// neither makes its directory nor writes config.yaml, and a new run that
// fails in its first step leaves nothing behind.
func TestRefusedRunWritesNothing(t *testing.T) {
	good := resumeConfig("fp32")
	good.Train.Steps = 2
	row, err := train.PlanConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	invalid := good
	invalid.Train.LR = -1
	tight := good
	tight.Memory.Capacity = config.ByteSize(row.PeakReservedBytes - 512)
	noData := good
	noData.Data.Source, noData.Data.Path = "folder", filepath.Join(t.TempDir(), "nowhere")
	for name, cfg := range map[string]config.Config{"invalid": invalid, "capacity": tight, "dataset": noData} {
		dir := filepath.Join(t.TempDir(), "run")
		if _, err := Run(context.Background(), cfg, Options{OutDir: dir}); err == nil {
			t.Fatalf("%s: the run was not refused", name)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: a refused run made %s", name, dir)
		}
	}

	// Resuming with a changed learning rate is refused: config.yaml stays.
	dir := t.TempDir()
	mustRun(t, context.Background(), good, Options{OutDir: dir}, nil)
	before := snapshotDir(t, dir)
	changed := good
	changed.Train.LR = 0.05
	if _, err := Run(context.Background(), changed, Options{OutDir: dir, Resume: "auto"}); err == nil {
		t.Fatal("a resume with another train.lr was not refused")
	}
	if after := snapshotDir(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("the refused resume changed the run directory")
	}

	// A run that runs out of memory in its first step (someone else took
	// the memory after the plan) leaves no directory.
	fresh := filepath.Join(t.TempDir(), "run")
	squeezed := good
	squeezed.Memory.Allocator = "caching" // an arena would refuse the extra allocation at once
	crow, err := train.PlanConfig(squeezed)
	if err != nil {
		t.Fatal(err)
	}
	squeezed.Memory.Capacity = config.ByteSize(crow.PeakReservedBytes)
	_, err = runOpts(t, context.Background(), squeezed, Options{OutDir: fresh}, func(tr *train.Trainer) {
		// All the capacity the build left (a paged pool places it above the
		// lasting buffers, within the planned pages), so the step has none.
		st := tr.Pool().Stats()
		extra := int64(4096)
		if st.PageBytes > 0 {
			extra = st.Capacity - st.Allocated.Current
		}
		if _, err := tr.Pool().Alloc(memory.Workspace, extra); err != nil {
			t.Fatal(err)
		}
	})
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("want an out-of-memory error in the first step, got %v", err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a run that failed in its first step left %s behind", fresh)
	}
}

// TestHostMemoryRefusal: without memory.capacity, a run whose planned need
// is above the host's available memory is refused with the figures and a
// variant that fits; a network far larger than any host (model.base 65536)
// is planned without touching host memory and refused the same way.
func TestHostMemoryRefusal(t *testing.T) {
	cfg := planGridConfig(32, 8, "bilinear", "batch")
	row, err := train.PlanConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	need, detail := train.HostNeed(row)
	if err := train.CheckFits(cfg, memlimit.Given(need, "in the test"), cpu.New()); err != nil {
		t.Errorf("need %d with exactly that available: %v", need, err)
	}
	err = train.CheckFits(cfg, memlimit.Given(need-1, "in the test"), cpu.New())
	var fe *train.FitError
	if !errors.As(err, &fe) || fe.Capacity || fe.Need != need || fe.Limit != need-1 {
		t.Fatalf("need %d with one byte less available: %v, want a host *train.FitError", need, err)
	}
	for _, want := range []string{"needs about", detail, "this process may use", "in the test", "variant fits"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	huge := resumeConfig("fp32")
	huge.Model.Base = 1 << 16
	err = train.CheckFits(huge, memlimit.Given(1<<40, "in the test"), cpu.New())
	if !errors.As(err, &fe) || fe.Need < 1<<40 {
		t.Fatalf("model.base 65536 with 1 TiB available: %v", err)
	}
}

// folderRunConfig is resumeConfig("fp32") over a folder dataset of n
// synthetic 16-pixel samples written into a new temporary folder.
func folderRunConfig(t *testing.T, n int) config.Config {
	t.Helper()
	ds := t.TempDir()
	syn, err := data.NewSynthetic(data.SyntheticConfig{Count: n, Size: 16, Classes: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteFolder(syn, ds); err != nil {
		t.Fatal(err)
	}
	cfg := resumeConfig("fp32")
	cfg.Data.Source, cfg.Data.Path, cfg.Data.ValFraction = data.SourceFolder, ds, 0.25
	return cfg
}

// TestHostNeedOfFileDatasets: a folder dataset's need does not grow with
// its samples (they are decoded as batches take them): 64 samples need
// what 8 do, and a run that fits with 8 is not refused with 64 (the need
// once counted every sample as held decoded, 3,328 bytes each here).
func TestHostNeedOfFileDatasets(t *testing.T) {
	need := func(samples int) (int64, string, config.Config) {
		cfg := folderRunConfig(t, samples)
		row, err := train.PlanConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n, detail := train.HostNeed(row)
		return n, detail, cfg
	}
	few, detail, _ := need(8)
	many, _, cfg := need(64)
	if few != many {
		t.Fatalf("8 samples need %d bytes, 64 need %d", few, many)
	}
	if !strings.Contains(detail, "the dataset's decodes and caches") {
		t.Errorf("the need's detail %q does not name the dataset's share", detail)
	}
	if err := train.CheckFits(cfg, memlimit.Given(many, "in the test"), cpu.New()); err != nil {
		t.Errorf("64 samples with their need available: %v", err)
	}
}

// TestResumeRebuildsMissingMetrics: a resumed run whose metrics.jsonl was
// deleted writes it again from the checkpoint's history (the steps before
// the checkpoint marked rebuilt, its validations in full) and goes on.
func TestResumeRebuildsMissingMetrics(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery, cfg.Train.ValEvery = 4, 4, 2
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	want := stepLosses(t, dir)
	if err := os.Remove(filepath.Join(dir, "metrics.jsonl")); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Steps = 6
	mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: "auto"}, nil)
	got := stepLosses(t, dir)
	if len(got) != 6 || !reflect.DeepEqual(got[:4], want) {
		t.Fatalf("step losses after the resume %v, want 6 starting with %v", got, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.Count(text, `"rebuilt":true`) != 4 || strings.Count(text, `"type":"val"`) != 3 {
		t.Errorf("metrics.jsonl: %d rebuilt step records (want 4), %d validations (want 3: steps 2, 4 and 6)",
			strings.Count(text, `"rebuilt":true`), strings.Count(text, `"type":"val"`))
	}
}

// TestResumeOnChangedDataRefused: a checkpoint records its dataset's
// fingerprint; resuming after files were added or renamed is refused
// naming what changed, before anything is written, and goes on with
// AllowDataChange, saying what changed.
func TestResumeOnChangedDataRefused(t *testing.T) {
	cfg := folderRunConfig(t, 12)
	ds := cfg.Data.Path
	cfg.Train.Steps, cfg.Train.CheckpointEvery = 2, 1
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)

	rename := func(from, to string) {
		t.Helper()
		for _, sub := range []string{"images", "masks"} {
			if err := os.Rename(filepath.Join(ds, sub, from+".png"), filepath.Join(ds, sub, to+".png")); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyPair := func(from, to string) {
		t.Helper()
		for _, sub := range []string{"images", "masks"} {
			b, err := os.ReadFile(filepath.Join(ds, sub, from+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ds, sub, to+".png"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg.Train.Steps = 4
	for _, tc := range []struct {
		name   string
		change func()
		want   []string
	}{
		{"renamed", func() { rename("00002", "renamed") }, []string{"files: images or masks were added, removed, renamed"}},
		{"added", func() {
			copyPair("00003", "extra1")
			copyPair("00004", "extra2")
			copyPair("00005", "extra3")
			copyPair("00006", "extra4")
		},
			[]string{"samples: 12, now 16", "training samples: 9, now 12", "validation samples: 3, now 4"}},
	} {
		tc.change()
		before := snapshotDir(t, dir)
		_, err := Run(context.Background(), cfg, Options{OutDir: dir, Resume: "auto"})
		var dc *DataChangedError
		if !errors.As(err, &dc) {
			t.Fatalf("%s: resume: %v, want a *DataChangedError", tc.name, err)
		}
		for _, w := range append(tc.want, "--allow-data-change", "was trained on data that has changed") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
		if after := snapshotDir(t, dir); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: the refused resume changed the run directory", tc.name)
		}
	}

	// Allowed: the run goes on (from the start of the next epoch of the
	// larger set) and says what changed.
	var log bytes.Buffer
	cfg.Output.Progress = "plain"
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: "auto", AllowDataChange: true, Progress: &log}, nil)
	if sum.Steps != 4 || !strings.Contains(log.String(), "--allow-data-change: the data changed since the checkpoint: samples: 12, now 16") {
		t.Errorf("allowed resume: %d steps, log %q", sum.Steps, log.String())
	}
	// Its checkpoints record the new data: resuming again needs no flag.
	cfg.Train.Steps = 5
	mustRun(t, context.Background(), cfg, Options{OutDir: dir, Resume: "auto"}, nil)
}

// TestResumeNoteNamesTheLatestValidation: the resume note's val mIoU is the
// last one measured up to the checkpoint (its step named), not the best
// nor one measured after it.
func TestResumeNoteNamesTheLatestValidation(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery, cfg.Train.ValEvery, cfg.Train.KeepLast = 6, 2, 2, 0
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	vals := map[int]float64{}
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(f)
	for dec.More() {
		var rec checkpoint.ValRecord
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		if rec.Type == "val" {
			vals[rec.Step] = rec.ValMIoU
		}
	}
	f.Close()
	for _, step := range []int{4, 2} {
		var log bytes.Buffer
		cfg.Output.Progress = "plain"
		ck := filepath.Join(dir, runfiles.Checkpoints, runfiles.CheckpointName(step, 1))
		mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir(), Resume: ck, Progress: &log}, nil)
		want := fmt.Sprintf("resuming from %s: step %d of 6, last val miou %.4f (step %d)", ck, step, vals[step], step)
		if !strings.Contains(log.String(), want) {
			t.Errorf("resuming step %d: the log lacks %q:\n%s", step, want, log.String())
		}
	}
}

// TestNaNLossStops: a loss that becomes NaN stops the run with the step,
// the learning rate, the last checkpoint before it and what to try, and
// metrics.jsonl stays valid JSON, line by line, up to the step before.
func TestNaNLossStops(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery = 8, 2
	dir := t.TempDir()
	steps := 0
	_, err := runOpts(t, context.Background(), cfg, Options{OutDir: dir}, func(tr *train.Trainer) {
		tr.AfterBackward = func() {
			if steps++; steps == 3 { // step 3's update spreads NaN weights: step 4's loss is NaN
				p := tr.Net.Params()[0]
				nan := make([]float32, p.Len())
				for i := range nan {
					nan[i] = float32(math.NaN())
				}
				p.Write(nan)
			}
		}
	})
	var d *DivergedError
	if !errors.As(err, &d) {
		t.Fatalf("got %v, want a *DivergedError", err)
	}
	last := filepath.Join(dir, runfiles.Checkpoints, runfiles.CheckpointName(2, 1))
	for _, want := range []string{"loss became NaN at step 4 (lr 0.003)", "the last checkpoint before it is " + last, "a lower train.lr", "or gradient clipping (train.clip_grad_norm: 12, nnU-Net's)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if losses := stepLosses(t, dir); len(losses) != 3 {
		t.Errorf("metrics.jsonl holds %d steps, want the 3 before the NaN", len(losses))
	}
	if _, err := checkpoint.Open(last); err != nil {
		t.Errorf("the last good checkpoint: %v", err)
	}
}

// TestPlantedLinkNotFollowed: a symlink planted at RUN/curves.png (a file
// a run writes but does not count as a run's) is replaced by the drawing;
// what it pointed at is left as it was.
func TestPlantedLinkNotFollowed(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps = 2
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, runfiles.Curves)); err != nil {
		t.Fatal(err)
	}
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("the link's target was written: %d bytes", len(b))
	}
	if st, err := os.Lstat(filepath.Join(dir, runfiles.Curves)); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s is not a regular file: %v", runfiles.Curves, err)
	}
}

// TestForceKeepsTheInit: --force into the run that train.init fine-tunes
// from (the run, or one of its checkpoints) is refused before anything is
// deleted.
func TestForceKeepsTheInit(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps = 2
	dir := t.TempDir()
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	before := snapshotDir(t, dir)
	for _, init := range []string{dir, sum.LastCheckpoint} {
		tune := cfg
		tune.Train.Init = init
		_, err := Run(context.Background(), tune, Options{OutDir: dir, Force: true})
		if err == nil || !strings.Contains(err.Error(), "--force would delete the earlier run in "+dir) || !strings.Contains(err.Error(), "--init "+init) {
			t.Errorf("--force --init %s: %v", init, err)
		}
		if after := snapshotDir(t, dir); !reflect.DeepEqual(after, before) {
			t.Fatalf("--force --init %s changed the run", init)
		}
	}
}

// TestPlantedFolderLinkNotFollowed: a link planted at RUN/checkpoints or
// RUN/tb never carries the run's writes outside its folder: in a new
// folder it makes the folder hold a run (refused; --force removes the link
// and trains), and a resume into a run whose folder became a link is
// refused before a step runs. The link's target is untouched throughout.
func TestPlantedFolderLinkNotFollowed(t *testing.T) {
	for _, name := range []string{runfiles.Checkpoints, runfiles.TensorBoard} {
		t.Run(name, func(t *testing.T) {
			cfg := resumeConfig("fp32")
			cfg.Train.Steps, cfg.Output.TensorBoard = 2, true
			dir, elsewhere := t.TempDir(), t.TempDir()
			link := filepath.Join(dir, name)
			if err := os.Symlink(elsewhere, link); err != nil {
				t.Fatal(err)
			}
			_, err := Run(context.Background(), cfg, Options{OutDir: dir})
			var existing *ExistingRunError
			if !errors.As(err, &existing) || !slices.Contains(existing.Files, name) {
				t.Errorf("a new run beside a planted %s link: %v", name, err)
			}
			mustRun(t, context.Background(), cfg, Options{OutDir: dir, Force: true}, nil)
			if st, err := os.Lstat(link); err != nil || !st.IsDir() {
				t.Errorf("after --force %s is not a real folder: %v", name, err)
			}
			if err := os.RemoveAll(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, link); err != nil {
				t.Fatal(err)
			}
			longer := cfg
			longer.Train.Steps = 4
			_, err = Run(context.Background(), longer, Options{OutDir: dir, Resume: "auto"})
			if err == nil || !strings.Contains(err.Error(), link+" is a link (to "+elsewhere+")") {
				t.Errorf("a resume through a planted %s link: %v", name, err)
			}
			if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
				t.Errorf("the link's target got %d entries", len(entries))
			}
		})
	}
}

// TestForceRemovesTheEarlierRunWhole: --force deletes the earlier run's
// best link (even one whose checkpoint is gone) and the outputs
// made from it in its folder (eval/, predict/, model-step-* exports), and
// the refusal without --force lists them: no file of the earlier run sits
// beside the new one.
func TestForceRemovesTheEarlierRunWhole(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.ValEvery, cfg.Train.KeepBest = 2, 2, true
	dir := t.TempDir()
	mustRun(t, context.Background(), cfg, Options{OutDir: dir}, nil)
	for _, f := range []string{"eval/val.json", "predict/img-step-2/img.png", "model-step-2.safetensors"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("earlier"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, runfiles.Best)); err != nil {
		t.Fatalf("the earlier run made no best link: %v", err)
	}
	_, err := Run(context.Background(), cfg, Options{OutDir: dir})
	var existing *ExistingRunError
	if !errors.As(err, &existing) {
		t.Fatalf("without --force: %v", err)
	}
	for _, want := range []string{runfiles.Best, "eval", "predict", "model-step-2.safetensors"} {
		if !slices.Contains(existing.Files, want) {
			t.Errorf("the refusal lists %v, not %s", existing.Files, want)
		}
	}
	cfg.Train.KeepBest = false
	mustRun(t, context.Background(), cfg, Options{OutDir: dir, Force: true}, nil)
	for _, gone := range []string{runfiles.Best, "eval", "predict", "model-step-2.safetensors"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s of the earlier run survived --force", gone)
		}
	}
}

// TestCrossValFolderRefused: a run into a memunet cv folder (its cv.json,
// or a fold_K that holds a run) is refused, with --force or --resume too,
// naming the folder, what makes it one and the fix; a folder with an
// empty fold_0 or a fold_x is not one.
func TestCrossValFolderRefused(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.CheckpointEvery = 1, 1
	for _, tc := range []struct {
		name  string
		files []string
		opts  Options
		want  string // "" : not refused
	}{
		{"cv.json", []string{runfiles.CrossValidation}, Options{}, "(cv.json)"},
		{"a fold's run", []string{"fold_1/" + runfiles.Config}, Options{Force: true}, "(fold_1/)"},
		{"both, resume", []string{runfiles.CrossValidation, "fold_0/" + runfiles.Summary}, Options{Resume: "auto"}, "(cv.json, fold_0/)"},
		{"an empty fold_0", []string{"fold_0/", "fold_x/" + runfiles.Config, "fold_01/" + runfiles.Config}, Options{}, ""},
	} {
		dir := t.TempDir()
		for _, f := range tc.files {
			path := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(f, "/") {
				if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		opts := tc.opts
		opts.OutDir = dir
		_, err := Run(context.Background(), cfg, opts)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), dir+" is a memunet cv folder "+tc.want) || !strings.Contains(err.Error(), "train into another --out DIR") {
			t.Errorf("%s: %v", tc.name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, runfiles.Config)); err == nil {
			t.Errorf("%s: the refused run wrote config.yaml", tc.name)
		}
	}
}
