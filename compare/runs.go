package compare

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
)

// RunsResult is what Runs read and drew.
type RunsResult struct {
	Names  []string        // each run's folder name
	Curves []report.Curves // its metrics.jsonl as read
	Path   string          // the val-curves.png written
}

// Print writes each run's last and best val mIoU and the chart's path.
func (r RunsResult) Print(w io.Writer) error {
	if err := report.PrintValidationTable(w, r.Names, r.Curves); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "wrote %s\n", r.Path)
	return err
}

// ErrNoRuns is Runs given no run folder.
var ErrNoRuns = errors.New("no run directory given")

// Runs reads existing runs' metrics.jsonl (as they are: a run still
// training is read up to its last complete line; nothing of a run is
// written) and draws their validation curves together into
// out/val-curves.png, holding out's lock while it writes.
func Runs(dirs []string, out string) (RunsResult, error) {
	var r RunsResult
	for _, d := range dirs {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		c, err := rundir.ReadCurves(filepath.Join(d, runfiles.Metrics))
		if err != nil {
			if os.IsNotExist(err) {
				return r, fmt.Errorf("compare --runs: %s has no metrics.jsonl: is it a run directory (train --out)?", d)
			}
			return r, fmt.Errorf("compare --runs: %w", err)
		}
		r.Names, r.Curves = append(r.Names, filepath.Base(filepath.Clean(d))), append(r.Curves, c)
	}
	if len(r.Curves) == 0 {
		return r, ErrNoRuns
	}
	lock, err := outdir.Acquire(out, LockCommand)
	if err != nil {
		return r, err
	}
	defer lock.Release()
	r.Path = filepath.Join(out, runfiles.ValCurves)
	if err := report.WriteValidations(r.Path, r.Names, r.Curves); err != nil {
		return r, fmt.Errorf("compare --runs: %w", err)
	}
	return r, nil
}
