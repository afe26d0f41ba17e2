package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/train"
)

// Gorgonia is the name of the plain-gorgonia reference row.
const Gorgonia = "gorgonia"

// LockCommand is who a compare's lock names as the folder's holder.
const LockCommand = "memunet compare"

// DefaultDir is the folder a compare without --out writes to:
// runs/compare-<timestamp>.
func DefaultDir(now time.Time) string {
	return filepath.Join("runs", "compare-"+now.Format("20060102-150405"))
}

// Options are a compare's settings.
type Options struct {
	// Exe is the memunet executable that trains each variant
	// (os.Executable of the command).
	Exe string
	// ConfigPath and Sets are the configuration as the user gave it (the
	// file and the --set flags), passed on to each child.
	ConfigPath string
	Sets       []string
	// Config is that configuration loaded.
	Config config.Config
	// Variants are the variants' names (train.VariantNames, and Gorgonia).
	Variants []string
	// Steps is the optimizer steps each variant runs.
	Steps int
	// Dir is the folder compare writes into; each variant runs in
	// Dir/<variant>.
	Dir string
	// Force lets New take a Dir that holds an earlier compare, whose
	// files and variant runs Run then replaces.
	Force bool
	// Stop, where set, ends Run once it is done: the running child gets
	// the signal that stopped it (rundir.SignalOf; else SIGTERM), Run
	// waits for it (a train child saves a checkpoint) and starts no
	// other.
	Stop context.Context
}

// UsedError is New's refusal of a Dir that holds an earlier compare.
type UsedError struct {
	Dir string
	// Holds names what is there: a compare file or a variant's run folder.
	Holds string
}

func (e *UsedError) Error() string {
	return fmt.Sprintf("compare: --out %s already holds a compare (%s), whose variant runs a new compare would replace", e.Dir, e.Holds)
}

// Compare is a compare whose folder is locked until Close.
type Compare struct {
	opts Options
	lock *outdir.Lock
}

// New checks o and takes o.Dir (made if need be) for the compare, or
// returns outdir's *InUseError naming the process that holds it, or a
// *UsedError where o.Dir holds an earlier compare and o.Force is not set.
func New(o Options) (*Compare, error) {
	if o.Steps < 1 {
		return nil, errors.New("compare: steps must be at least 1")
	}
	if o.Exe == "" {
		return nil, errors.New("compare: no executable to run the variants")
	}
	lock, err := outdir.Acquire(o.Dir, LockCommand)
	if err != nil {
		return nil, err
	}
	if held := earlierCompare(o.Dir); held != "" && !o.Force {
		lock.Release()
		return nil, &UsedError{Dir: o.Dir, Holds: held}
	}
	return &Compare{opts: o, lock: lock}, nil
}

// earlierCompare is the first thing in dir that an earlier compare wrote
// (one of its files, or a variant's run folder), "" if none.
func earlierCompare(dir string) string {
	for _, f := range runfiles.CompareFiles() {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return f
		}
	}
	for _, name := range append(train.VariantNames(), Gorgonia) {
		if entries, err := os.ReadDir(filepath.Join(dir, name)); err == nil && len(entries) > 0 {
			return name + "/"
		}
	}
	return ""
}

// Close gives the folder back.
func (c *Compare) Close() error { return c.lock.Release() }

// Files are the paths of the files Run writes.
func (c *Compare) Files() []string {
	var out []string
	for _, f := range runfiles.CompareFiles() {
		out = append(out, filepath.Join(c.opts.Dir, f))
	}
	return out
}

// RunDirs are the folders the variants run in, Dir/<variant>.
func (c *Compare) RunDirs() []string {
	var out []string
	for _, name := range c.opts.Variants {
		out = append(out, filepath.Join(c.opts.Dir, strings.TrimSpace(name)))
	}
	return out
}

// Run runs every variant in turn, calling done with each one's row as it
// ends, then writes compare.csv, compare.json, memory.png and timeline.png
// into the folder. A variant that fails is a row with its error; Run fails
// only when the files cannot be written, or when o.Stop ends it: then it
// returns the rows so far with context.Cause(o.Stop) and writes no files.
func (c *Compare) Run(done func(report.CompareRow)) ([]report.CompareRow, error) {
	o := c.opts
	var rows []report.CompareRow
	timelines := map[string]report.Timeline{}
	dirs := c.RunDirs()
	for i, name := range o.Variants {
		if err := c.stopped(); err != nil {
			return rows, err
		}
		name, dir := strings.TrimSpace(name), dirs[i]
		var row report.CompareRow
		if name == Gorgonia {
			row = c.runGorgonia(dir)
		} else {
			var tl report.Timeline
			row, tl = c.runVariant(name, dir)
			if len(tl.Points) > 0 {
				timelines[name] = tl
			}
		}
		if err := c.stopped(); err != nil {
			return rows, err // the row is the stop's, not the variant's
		}
		if done != nil {
			done(row)
		}
		rows = append(rows, row)
	}
	setup := report.NewCompareSetup(o.ConfigPath, o.Config, o.Steps, rows)
	return rows, report.WriteCompare(o.Dir, rows, timelines, setup)
}

// stopped is the error that ends a compare whose Stop is done; nil while
// it goes on.
func (c *Compare) stopped() error {
	if c.opts.Stop == nil {
		return nil
	}
	return context.Cause(c.opts.Stop) // nil while it is not done
}

// runVariant trains one variant in a child process and reads its run files.
func (c *Compare) runVariant(name, dir string) (report.CompareRow, report.Timeline) {
	o := c.opts
	row := report.CompareRow{Name: name, Pool: true}
	vc, err := train.DeriveVariant(o.Config, name)
	if err != nil {
		row.Error = err.Error()
		return row, report.Timeline{}
	}
	row.Variant = vc.Variant()
	all := append(append([]string{}, o.Sets...), row.Variant.Sets()...)
	all = append(all, "train.steps="+strconv.Itoa(o.Steps), "train.epochs=0", "train.val_every=0",
		"output.progress=none", "memory.timeline=true", "memory.fit=off")
	// compare owns dir: a rerun into the same folder replaces its variants' runs.
	args := append([]string{"train", "--config", o.ConfigPath, "--out", dir, "--force"}, setArgs(all)...)
	if err := c.runChild(args); err != nil {
		row.Error = err.Error()
		return row, report.Timeline{}
	}
	var sum rundir.Summary
	if err := readJSON(filepath.Join(dir, runfiles.Summary), &sum); err != nil {
		row.Error = err.Error()
		return row, report.Timeline{}
	}
	if sum.Interrupted || sum.Steps != o.Steps {
		row.Error = fmt.Sprintf("stopped after %d of %d steps", sum.Steps, o.Steps)
		return row, report.Timeline{}
	}
	row.PeakAllocatedBytes, row.PeakReservedBytes, row.PeakRSSBytes = sum.PeakAllocatedBytes, sum.PeakReservedBytes, sum.PeakRSSBytes
	row.PeakByCategory, row.StepMSMedian, row.FinalLoss = sum.PeakAllocatedByCategory, sum.StepMSMedian, sum.FinalLoss
	row.Params = sum.Params
	row.Conv, row.CUDNN, row.ConvWorkspaceBytes = sum.Conv, sum.CUDNN, sum.ConvWorkspaceBytes
	row.DeviceUsedPeakBytes, row.ContextOverheadBytes = sum.DeviceUsedPeakBytes, sum.ContextOverheadBytes
	if sum.DeviceUsedPeakBytes > 0 {
		row.DeviceBeyondPoolBytes = sum.DeviceUsedPeakBytes - sum.ContextOverheadBytes - sum.PeakReservedBytes
	}
	row.PagesMapped, row.PagesUnmapped = sum.PagesMapped, sum.PagesUnmapped
	row.OffloadedPeakBytes = sum.OffloadedPeakBytes
	if sum.StepMSMedian > 0 {
		row.SamplesPerSecond = float64(sum.EffectiveBatch) / (sum.StepMSMedian / 1000)
	}
	var tl report.Timeline
	if err := readJSON(filepath.Join(dir, runfiles.Timeline), &tl); err != nil {
		row.Error = err.Error()
	}
	return row, tl
}

// runGorgonia runs the plain-gorgonia reference in a child process.
func (c *Compare) runGorgonia(dir string) report.CompareRow {
	o := c.opts
	row := report.CompareRow{Name: Gorgonia, Variant: config.Variant{MicroBatch: o.Config.Variant().EffectiveBatch(), Accumulate: 1,
		Precision: backend.Float32, EmptyCache: o.Config.Memory.EmptyCache}}
	args := append([]string{"gorgonia", "--config", o.ConfigPath, "--out", dir, "--steps", strconv.Itoa(o.Steps)}, setArgs(o.Sets)...)
	if err := c.runChild(args); err != nil {
		row.Error = err.Error()
		return row
	}
	var sum GorgoniaSummary
	if err := readJSON(filepath.Join(dir, runfiles.Summary), &sum); err != nil {
		row.Error = err.Error()
		return row
	}
	if sum.Steps != o.Steps {
		row.Error = fmt.Sprintf("stopped after %d of %d steps", sum.Steps, o.Steps)
		return row
	}
	row.PeakRSSBytes, row.StepMSMedian, row.FinalLoss = sum.PeakRSSBytes, sum.StepMSMedian, sum.FinalLoss
	if sum.StepMSMedian > 0 {
		row.SamplesPerSecond = float64(row.MicroBatch) / (sum.StepMSMedian / 1000)
	}
	return row
}

func setArgs(sets []string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, "--set", s)
	}
	return out
}

// runChild runs the memunet executable with args; its output is discarded
// unless it fails, when its last error line becomes the error. The child
// runs in a process group of its own, so that a terminal's Ctrl-C reaches
// only compare, which passes the signal on once (childAttr: on Linux the
// child also gets SIGTERM if compare dies, so none outlives it). compare
// then waits for the child to end.
func (c *Compare) runChild(args []string) error {
	stop := c.opts.Stop
	if stop == nil {
		stop = context.Background()
	}
	cmd := exec.CommandContext(stop, c.opts.Exe, args...)
	cmd.SysProcAttr = childAttr()
	cmd.Cancel = func() error {
		sig, ok := rundir.SignalOf(stop)
		if !ok {
			sig = syscall.SIGTERM
		}
		return cmd.Process.Signal(sig)
	}
	var errOut strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(strings.TrimPrefix(msg, "memunet: "))
	}
	return nil
}

// maxRunFileBytes bounds a child's summary.json and timeline.json.
const maxRunFileBytes = 256 << 20

func readJSON(path string, v any) error {
	raw, err := infile.ReadFile(path, maxRunFileBytes)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
