package rundir

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/train"
)

// setUp makes everything the loop needs, checking first and writing last:
// the directory claimed (claim), the checkpoint to resume (openResume), the
// trainer (build); then the run starts (begin) and its observers open.
func (r *run) setUp(ctx context.Context, cfg config.Config) error {
	earlier, err := r.claim(cfg)
	if err != nil {
		return err
	}
	resume, err := r.openResume(cfg)
	if err != nil {
		return err
	}
	if err := r.useScratch(); err != nil {
		return err
	}
	notes, err := r.build(ctx, cfg, resume)
	if err != nil {
		return err
	}
	r.prog = newProgress(r.cfg.Output, r.opts, r.total)
	if r.ckpt, err = newCheckpointer(ctx, r.tr, r.opts, resume, r.prog.note); err != nil {
		return err
	}
	// Everything is checked: the run starts, and writes.
	if err := r.begin(earlier); err != nil {
		return err
	}
	if err := r.openObservers(); err != nil {
		return err
	}
	for _, line := range notes {
		r.prog.note(line)
	}
	return nil
}

// claim takes the run directory for this process (rank 0 of a data-parallel
// run; the others write nothing there) before looking into it, so that two
// starts cannot both find it empty, nor --force delete what another run
// writes; the lock is held until Run returns. A new run is refused in a
// directory that holds one, unless --force, and --force never deletes what
// train.init reads. It returns the earlier run's files (for --force).
func (r *run) claim(cfg config.Config) ([]string, error) {
	if r.comm.Rank() != 0 {
		return nil, nil
	}
	if r.opts.OutDir == "" {
		return nil, fmt.Errorf("output.dir: name the run directory (--out DIR)")
	}
	if err := checkApartFromData(r.opts.OutDir, cfg.Data.Path); err != nil {
		return nil, err
	}
	lock, err := outdir.Acquire(r.opts.OutDir, "memunet train")
	if err != nil {
		return nil, err
	}
	r.lock = lock
	if cv := checkpoint.CrossValFilesIn(r.opts.OutDir); len(cv) > 0 {
		return nil, fmt.Errorf("%s is a memunet cv folder (%s), whose folds are runs of their own: train into another --out DIR, or continue a fold in its own folder: --resume auto --out %s",
			r.opts.OutDir, strings.Join(cv, ", "), filepath.Join(r.opts.OutDir, runfiles.FoldDir(0)))
	}
	if r.opts.Resume != "" {
		// The folders a run writes into must be its own.
		for _, name := range []string{runfiles.Checkpoints, runfiles.TensorBoard} {
			if err := outdir.NotALink(filepath.Join(r.opts.OutDir, name)); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	earlier := runFilesIn(r.opts.OutDir)
	if len(earlier) > 0 && !r.opts.Force {
		return nil, &ExistingRunError{Dir: r.opts.OutDir, Files: earlier, Invocation: cfg.Invocation}
	}
	return earlier, checkInitKept(cfg.Invocation, cfg.Train.Init, r.opts.OutDir, earlier)
}

// checkApartFromData refuses, before anything is written, a run directory
// that is the dataset's folder (data.path) or inside it: its curves.png
// would land among the images (under images/, as a sample with no mask)
// and break the next scan. It refuses the reverse only where the run
// would delete the data: inside its checkpoints/ or tb/, which the run
// prunes and --force removes. Links are resolved.
func checkApartFromData(out, dataPath string) error {
	if dataPath == "" { // synthetic data reads no folder
		return nil
	}
	if outdir.Within(out, dataPath) {
		return fmt.Errorf("--out (output.dir) %s is data.path %s or inside it: the run's files (curves.png, config.yaml, checkpoints/) would be mixed with the dataset it reads, and read as samples; train into a folder outside %s",
			out, dataPath, dataPath)
	}
	for _, name := range []string{runfiles.Checkpoints, runfiles.TensorBoard} {
		if dir := filepath.Join(out, name); outdir.Within(dataPath, dir) {
			return fmt.Errorf("data.path %s is inside the run's %s/ (%s), which the run prunes and --force removes: keep the dataset outside it, or train into another --out",
				dataPath, name, dir)
		}
	}
	return nil
}

// openResume is the checkpoint to continue (nil: none), verified, that cfg
// may continue with this many processes.
func (r *run) openResume(cfg config.Config) (*checkpoint.Checkpoint, error) {
	resume, err := openResume(cfg, r.opts)
	if err != nil || resume == nil {
		return nil, err
	}
	// Each rank's share of every batch depends on the world size.
	if world := max(resume.Manifest.World, 1); world != r.comm.Size() {
		return nil, fmt.Errorf("%s was trained by %d process(es) and this run has %d: resume it with the same number (mpirun -np %d, or one process for 1)",
			resume.Dir, world, r.comm.Size(), world)
	}
	return resume, nil
}

// useScratch sends the files of a rank other than 0 (the same steps) into
// a scratch directory of its own, removed at the end.
func (r *run) useScratch() error {
	if r.comm.Rank() == 0 {
		return nil
	}
	scratch, err := os.MkdirTemp("", fmt.Sprintf("memunet-rank%d-", r.comm.Rank()))
	if err != nil {
		return err
	}
	r.scratch = scratch
	r.opts.OutDir, r.opts.Progress, r.opts.OnStart = filepath.Join(scratch, "run"), nil, nil
	return nil
}

// build opens the dataset under ctx, makes the trainer on the target
// backend once the plan fits, loads train.init's weights into a new run,
// and returns the lines worth saying about what it decided.
func (r *run) build(ctx context.Context, cfg config.Config, resume *checkpoint.Checkpoint) ([]string, error) {
	// The data first, where a signal can stop the scan of a large folder;
	// planning and the trainer below find the set already open.
	if _, err := train.OpenSetContext(ctx, cfg); err != nil {
		if stop := During(ctx, "the data scan"); stop != nil {
			return nil, stop // the signal, not the scan's "context canceled"
		}
		return nil, err
	}
	b := r.opts.backend
	if b == nil {
		var err error
		if b, err = train.Target(cfg); err != nil {
			return nil, err
		}
	}
	cfg, capNote := train.ResolveCapacity(cfg, b)
	r.host = memlimit.Read()
	if err := train.CheckFits(cfg, r.host, b); err != nil {
		return nil, err
	}
	tr, err := train.NewTrainer(cfg, train.Placement{Backend: b, Comm: r.comm})
	if err != nil {
		return nil, err
	}
	r.tr = tr
	initNote := ""
	if resume == nil { // a resumed run has its weights
		if initNote, err = LoadInit(tr); err != nil {
			return nil, err
		}
	}
	if r.opts.onTrainer != nil {
		r.opts.onTrainer(tr)
	}
	r.cfg = tr.Config // memory.fit: auto may have chosen another variant
	if r.total = r.cfg.Train.Steps; r.total == 0 {
		r.total = r.cfg.Train.Epochs * tr.StepsPerEpoch()
	}
	notes := append([]string{"host memory: this process may use " + r.host.String(), capNote, initNote}, tr.FitLog...)
	notes = append(notes, tr.AllocatorNote)
	if cr, ok := b.(device.ConvResolver); ok {
		notes = append(notes, cr.ConvProvider().Note())
	}
	if r.cfg.Train.Loss.ClassWeights.Auto {
		notes = append(notes, fmt.Sprintf("train.loss.class_weights: auto: %s (inverse class frequency of the training masks)", formatWeights(tr.Loss.Weights)))
	}
	return slices.DeleteFunc(notes, func(s string) bool { return s == "" }), nil
}

// begin starts writing: the start banner, --force's deletion of the
// earlier run, the directory and config.yaml.
func (r *run) begin(earlier []string) error {
	if r.opts.OnStart != nil {
		r.opts.OnStart(r.cfg, device.Describe(r.tr.Device.Backend))
	}
	r.wrote = true
	if len(earlier) > 0 {
		if err := removeRunFiles(r.opts.OutDir, earlier); err != nil {
			return err
		}
		r.prog.note(fmt.Sprintf("--force: deleted the earlier run in %s: %s", r.opts.OutDir, strings.Join(earlier, ", ")))
	}
	if err := os.MkdirAll(r.opts.OutDir, 0o755); err != nil { // a data-parallel rank's scratch
		return fmt.Errorf("output.dir %s: %w", r.opts.OutDir, err)
	}
	resolved, err := r.cfg.Marshal()
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(filepath.Join(r.opts.OutDir, runfiles.Config), resolved); err != nil {
		return fmt.Errorf("output.dir: %w", err)
	}
	split, err := json.Marshal(r.tr.Split())
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(filepath.Join(r.opts.OutDir, runfiles.Split), append(split, '\n')); err != nil {
		return fmt.Errorf("output.dir: %w", err)
	}
	return nil
}

// openObservers opens metrics.jsonl (taking back the validation an
// interrupt recorded after its checkpoint), says where a resumed run
// stands, and makes the observers and the summary.
func (r *run) openObservers() error {
	metrics, recovered, err := openMetricsLog(r.opts.OutDir, r.ckpt.start, r.ckpt.history)
	if err != nil {
		return fmt.Errorf("output.dir: %w", err)
	}
	r.observers = append(r.observers, metrics)
	r.ckpt.recover(recovered)
	if line := r.ckpt.resumeNote(r.total); line != "" {
		r.prog.note(line)
		r.prog.resumeAt(r.ckpt.start)
		if n := len(r.ckpt.history.Val); n > 0 {
			r.prog.miou = r.ckpt.history.Val[n-1].ValMIoU
		}
	}
	if r.cfg.Memory.Timeline {
		r.observers = append(r.observers, &timelineWriter{path: filepath.Join(r.opts.OutDir, runfiles.Timeline), pool: r.tr.Pool()})
	}
	if r.comm.Rank() == 0 {
		curves, err := newCurvesDrawer(r.opts.OutDir, r.cfg)
		if err != nil {
			return err
		}
		r.observers = append(r.observers, curves)
	}
	if r.cfg.Output.TensorBoard && r.comm.Rank() == 0 {
		r.tr.PreviewImages = tbPreviewImages
		r.observers = append(r.observers, newTBObserver(filepath.Join(r.opts.OutDir, runfiles.TensorBoard), r.ckpt.start, r.prog.note,
			func() *train.Preview { return r.tr.Preview }))
	}
	r.sum = r.newSummary()
	r.tally = &tally{run: r}
	r.observers = append(r.observers, r.ckpt, r.tally, r.prog)
	return nil
}

// newSummary is the summary before this part's first step: the run so
// far, as the resumed checkpoint knows it.
func (r *run) newSummary() *Summary {
	tr, c := r.tr, r.ckpt
	sum := &Summary{
		Loss: string(tr.Loss.Kind), ClassWeights: tr.Loss.Weights,
		Fit: tr.FitLog, Device: device.Describe(tr.Device.Backend),
		Params: tr.Net.NumParams(), PeakAllocatedByCategory: map[string]int64{}, PeakByPhase: map[string]map[string]int64{},
		Variant: r.cfg.Variant(), EffectiveBatch: r.cfg.Variant().EffectiveBatch(),
		ResumedFrom: c.resumed, Steps: c.start,
	}
	if n := len(c.history.Steps); n > 0 {
		sum.Epochs, sum.FinalLoss = c.history.Steps[n-1].Epoch, float64(c.history.Steps[n-1].Loss)
	}
	if n := len(c.history.Val); n > 0 && c.history.Val[n-1].Step == c.start {
		r.lastVal, sum.Validation = c.start, c.history.Val[n-1].Validation
	}
	if c.resumed != "" {
		sum.PartFromStep = c.start
	}
	if cr, ok := tr.Device.Backend.(device.ConvResolver); ok && cr.ConvProvider().Choice != "" {
		sum.Conv, sum.CUDNN = cr.ConvProvider().Computes(), cr.ConvProvider().CUDNN
	}
	if rep, ok := tr.Device.Backend.(device.MemoryReporter); ok { // its context overhead: writeSummary's, at the end
		if _, total, err := rep.DeviceMemory(); err == nil {
			sum.DeviceTotalBytes = total
		}
	}
	return sum
}

// formatWeights writes weights as [w0, w1, ...] with 4 significant digits.
func formatWeights(w []float64) string {
	parts := make([]string, len(w))
	for i, v := range w {
		parts[i] = strconv.FormatFloat(v, 'g', 4, 64)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
