package predict

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
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
	metrics.Validation
}

// Evaluate scores split (Score) as an EvalReport; sets are the data
// overrides the checkpoint's configuration was read with, recorded.
func (p *Predictor) Evaluate(split string, tta bool, lim Limits, sets []string) (EvalReport, error) {
	v, samples, err := p.Score(split, tta, lim)
	if err != nil {
		return EvalReport{}, err
	}
	return EvalReport{Checkpoint: p.Checkpoint.Dir, Step: p.Checkpoint.Manifest.Step, Split: split, Samples: samples,
		Data: sets, TTA: tta, Validation: v}, nil
}

// WriteFile writes r as indented JSON to path, whole or not at all.
func (r EvalReport) WriteFile(path string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := outdir.WriteBytes(path, append(js, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// EvalReportName is an evaluation's default report name: the split and
// step, and what changed the scores (tta; data overrides sets: a hash of
// them), so that an evaluation on other data or with TTA never replaces
// the plain one's report.
func EvalReportName(split string, step int, tta bool, sets []string) string {
	name := fmt.Sprintf("%s-step-%08d", split, step)
	if tta {
		name += "-tta"
	}
	if len(sets) > 0 {
		sum := sha256.Sum256([]byte(strings.Join(sets, "\n")))
		name += "-data-" + hex.EncodeToString(sum[:4])
	}
	return name + ".json"
}
