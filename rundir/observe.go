package rundir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/train"
)

// observer is told of a run as it goes, each keeping one of its outputs:
// metrics.jsonl (metricsLog), timeline.json (timelineWriter), curves.png
// (curvesDrawer), TensorBoard's tb/ (tbObserver), checkpoints
// (checkpointer), the summary's figures (tally), the progress lines
// (progress).
// Run tells them in that order; the first error stops the run. One that
// holds a file is an io.Closer, closed when Run returns.
type observer interface {
	// observeStep follows every optimizer step.
	observeStep(rec StepRecord, res train.StepResult) error
	// observeValidation follows every validation, after its step's
	// observeStep.
	observeValidation(v checkpoint.ValRecord) error
	// observeEnd follows the last step and its validation (and an
	// interrupt's checkpoint).
	observeEnd(sum *Summary) error
}

// metricsLog appends a record per step and per validation to
// metrics.jsonl.
type metricsLog struct {
	f   *os.File
	enc *json.Encoder
}

// openMetricsLog opens dir's metrics.jsonl (see openMetrics) and returns the
// validations it kept that the history lacks.
func openMetricsLog(dir string, keepThrough int, history checkpoint.MetricsHistory) (*metricsLog, []checkpoint.ValRecord, error) {
	f, recovered, err := openMetrics(dir, keepThrough, history)
	if err != nil {
		return nil, nil, err
	}
	return &metricsLog{f: f, enc: json.NewEncoder(f)}, recovered, nil
}

func (m *metricsLog) observeStep(rec StepRecord, _ train.StepResult) error { return m.write(rec) }
func (m *metricsLog) observeValidation(v checkpoint.ValRecord) error       { return m.write(v) }
func (m *metricsLog) observeEnd(*Summary) error                            { return nil }
func (m *metricsLog) Close() error                                         { return m.f.Close() }

func (m *metricsLog) write(rec any) error {
	if err := m.enc.Encode(rec); err != nil {
		return fmt.Errorf("writing metrics.jsonl: %w", err)
	}
	return nil
}

// timelineWriter writes timeline.json after every step: the allocations
// and frees since the loop cleared the pool's timeline before the step.
type timelineWriter struct {
	path string
	pool *memory.Pool
}

func (t *timelineWriter) observeStep(rec StepRecord, _ train.StepResult) error {
	return writeTimeline(t.path, rec.Step, t.pool.Timeline())
}
func (t *timelineWriter) observeValidation(checkpoint.ValRecord) error { return nil }
func (t *timelineWriter) observeEnd(*Summary) error                    { return nil }

// writeTimeline writes timeline.json: the step's allocations, frees and
// phases (report.Timeline).
func writeTimeline(path string, step int, events []memory.Event) error {
	out, err := json.Marshal(report.TimelineOf(step, events))
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(path, out); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// curvesDrawer keeps curves.png: redrawn at a validation unless it was
// drawn less than a second ago (validations of tiny runs come faster than
// a drawing), and always at the end. A resumed run's curves start with
// the steps before.
type curvesDrawer struct {
	path, title string
	curves      report.Curves
	lastDraw    time.Time
}

// newCurvesDrawer reads what dir's metrics.jsonl holds already.
func newCurvesDrawer(dir string, cfg config.Config) (*curvesDrawer, error) {
	curves, err := ReadCurves(filepath.Join(dir, runfiles.Metrics))
	if err != nil {
		return nil, err
	}
	title := fmt.Sprintf("%s: UNet base %d, depth %d; %s", filepath.Base(filepath.Clean(dir)), cfg.Model.Base, cfg.Model.Depth, cfg.Variant())
	return &curvesDrawer{path: filepath.Join(dir, runfiles.Curves), title: title, curves: curves, lastDraw: time.Now()}, nil
}

func (c *curvesDrawer) observeStep(rec StepRecord, _ train.StepResult) error {
	addStep(&c.curves, rec)
	return nil
}

func (c *curvesDrawer) observeValidation(v checkpoint.ValRecord) error {
	addVal(&c.curves, v)
	return c.draw(false)
}

func (c *curvesDrawer) observeEnd(*Summary) error { return c.draw(true) }

func (c *curvesDrawer) draw(force bool) error {
	if len(c.curves.Steps) == 0 || !force && time.Since(c.lastDraw) < time.Second {
		return nil
	}
	c.lastDraw = time.Now()
	if err := report.WriteCurves(c.path, c.curves, c.title); err != nil {
		return fmt.Errorf("writing %s: %w", runfiles.Curves, err)
	}
	return nil
}

// tally keeps the summary's figures: peaks (of steps and validations),
// phases, step and communication times, what memory.fit: auto changed,
// and at the end the allocator's and the process's.
type tally struct {
	run            *run
	stepMS, commMS []float64
}

// notePeak takes a step's or a validation's peak allocated bytes (with its
// split by category) and peak reserved bytes.
func (t *tally) notePeak(peak, reserved int64, split map[string]int64) {
	sum := t.run.sum
	if peak > sum.PeakAllocatedBytes {
		sum.PeakAllocatedBytes = peak
		sum.PeakAllocatedByCategory = split
	}
	sum.PeakReservedBytes = max(sum.PeakReservedBytes, reserved)
}

func (t *tally) observeStep(rec StepRecord, res train.StepResult) error {
	r, sum := t.run, t.run.sum
	t.stepMS = append(t.stepMS, rec.StepMS)
	if r.comm.Size() > 1 {
		t.commMS = append(t.commMS, rec.CommMS)
	}
	t.notePeak(res.Peak, res.PeakReserved, res.PeakByCategory)
	for phase, pm := range res.Phases {
		if cur, ok := sum.PeakByPhase[phase]; !ok || pm.PeakAllocatedBytes > cur["total"] {
			row := map[string]int64{"total": pm.PeakAllocatedBytes}
			for k, v := range pm.PeakByCategory {
				row[k] = v
			}
			sum.PeakByPhase[phase] = row
		}
	}
	sum.DeviceUsedPeakBytes = max(sum.DeviceUsedPeakBytes, res.DeviceUsedPeak)
	if fit := r.tr.FitLog; len(fit) > len(sum.Fit) { // memory.fit: auto moved to another variant
		for _, line := range fit[len(sum.Fit):] {
			r.prog.note(line)
		}
		sum.Variant = r.tr.Config.Variant()
	}
	sum.Fit = r.tr.FitLog
	sum.Steps, sum.Epochs, sum.FinalLoss = rec.Step, res.Epoch, res.Loss
	return nil
}

func (t *tally) observeValidation(v checkpoint.ValRecord) error {
	t.run.sum.Validation = v.Validation
	return nil
}

// observeEnd completes the summary: checkpoints, the allocator, times,
// and every rank's peaks (a collective: every rank calls it).
func (t *tally) observeEnd(sum *Summary) error {
	r, tr, c := t.run, t.run.tr, t.run.ckpt
	sum.OffloadedPeakBytes = tr.OffloadedPeak()
	sum.LastCheckpoint = c.lastPath
	if c.bestPath != "" {
		sum.BestCheckpoint, sum.BestValMIoU = c.bestPath, &c.bestMIoU
		sum.Monitor, sum.BestScore = c.bestMonitor, &c.bestScore
	}
	st := tr.Pool().Stats()
	sum.Allocator, sum.SegmentAllocs, sum.ArenaBytes, sum.ArenaMisses, sum.ArenaMiss =
		r.cfg.Memory.Allocator, st.SegmentAllocs, st.ArenaBytes, st.ArenaMisses, tr.Pool().ArenaMiss()
	sum.PageBytes, sum.PagesMapped, sum.PagesUnmapped = st.PageBytes, st.PagesMapped, st.PagesUnmapped
	sum.AllocatorNote = tr.AllocatorNote
	if sum.ArenaMisses > 0 {
		r.prog.note(fmt.Sprintf("memory.allocator: arena: %d allocations the plan did not foresee went to the caching pool; the first: %s",
			sum.ArenaMisses, sum.ArenaMiss))
	}
	sum.LossScale, sum.SkippedSteps = tr.Scaler.LossScale(), tr.Scaler.Skipped
	sum.StepMSMedian = median(t.stepMS)
	if len(t.commMS) > 0 {
		sum.CommMSMedian = median(t.commMS)
	}
	sum.PeakRSSBytes = PeakRSS()
	if r.host.Bytes > 0 {
		sum.HostMemoryBytes, sum.HostMemorySource = r.host.Bytes, r.host.Source()
	}
	sum.CacheFlushes = st.CacheFlushes
	sum.PartWallSeconds = time.Since(r.start).Seconds()
	sum.WallSeconds = c.priorWall + sum.PartWallSeconds
	sum.PartSteps = r.stepsRun
	if r.comm.Size() > 1 {
		var err error
		if sum.Ranks, err = gatherRanks(r.comm, sum.PeakAllocatedBytes, sum.PeakReservedBytes); err != nil {
			return err
		}
		sum.World = r.comm.Size()
	}
	return nil
}

// The progress bar or lines, as an observer.
func (p *progress) observeStep(rec StepRecord, _ train.StepResult) error {
	p.step(rec)
	return nil
}

func (p *progress) observeValidation(v checkpoint.ValRecord) error {
	p.validation(v)
	return nil
}

func (p *progress) observeEnd(*Summary) error {
	p.finish()
	return nil
}
