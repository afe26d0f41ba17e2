package predict

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// EvalReport is memunet eval's JSON: a split's scores by a checkpoint.
type EvalReport struct {
	Checkpoint string `json:"checkpoint"`
	Step       int    `json:"step"`
	Split      string `json:"split"`
	Samples    int    `json:"samples"`
	// Data is the data section evaluated on, where --set changed it.
	Data []string `json:"data_overrides,omitempty"`
	TTA  bool     `json:"tta,omitempty"`
	// PlannedRSSBytes and PeakRSSBytes are the process's planned and
	// measured peak resident memory, as predict.json's.
	PlannedRSSBytes int64 `json:"planned_rss_bytes,omitempty"`
	PeakRSSBytes    int64 `json:"peak_rss_bytes,omitempty"`
	metrics.Validation
	// PerCase is each case's scores (an image, or a volume: a nifti
	// volume's slices together) with their means over cases, as nnU-Net
	// reports them; WriteFile also writes them as CSV (CasesCSV).
	PerCase CaseReport `json:"per_case"`
}

// Evaluate scores split (Score) as an EvalReport, the collector held to
// its plans as Run holds it; sets are the data overrides the checkpoint's
// configuration was read with, recorded.
func (p *Predictor) Evaluate(split string, tta bool, lim Limits, sets []string) (EvalReport, error) {
	p.held = p.holdGC()
	defer func() { p.held.release(); p.held = nil }()
	var planned Report
	p.dataChanged = len(sets) > 0
	var cases CaseReport
	v, samples, err := p.score(split, tta, lim, &planned, &cases)
	if err != nil {
		return EvalReport{}, err
	}
	r := EvalReport{Checkpoint: p.Checkpoint.Dir, Step: p.Checkpoint.Manifest.Step, Split: split, Samples: samples,
		Data: sets, TTA: tta, PlannedRSSBytes: planned.PlannedRSSBytes, Validation: v, PerCase: cases}
	if _, peak, ok := memlimit.Resident(); ok {
		r.PeakRSSBytes = peak
	}
	return r, nil
}

// WriteFile writes r as indented JSON to path, and its cases as CSV to
// CasesCSV(path), each whole or not at all.
func (r EvalReport) WriteFile(path string) error {
	return writeReport(path, r, r.PerCase, len(r.PerClass))
}

// writeReport writes report as indented JSON to path and cases (of
// classes classes) as CSV to CasesCSV(path), each whole or not at all.
func writeReport(path string, report any, cases CaseReport, classes int) error {
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(path, append(js, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	var b bytes.Buffer
	if err := cases.WriteCSV(&b, classes); err != nil {
		return err
	}
	if err := outdir.WriteBytes(CasesCSV(path), b.Bytes()); err != nil {
		return fmt.Errorf("writing %s: %w", CasesCSV(path), err)
	}
	return nil
}

// EvalReportName is an evaluation's default report name: the split and
// step, and what changed the scores (tta; data overrides sets: a hash of
// them), so that an evaluation on other data or with TTA never replaces
// the plain one's report.
func EvalReportName(split string, step int, tta bool, sets []string) string {
	name := runfiles.AtStep(split, step)
	if tta {
		name += "-tta"
	}
	if len(sets) > 0 {
		sum := sha256.Sum256([]byte(strings.Join(sets, "\n")))
		name += "-data-" + hex.EncodeToString(sum[:4])
	}
	return name + ".json"
}
