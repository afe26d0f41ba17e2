package rundir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/report"
)

func addStep(c *report.Curves, r StepRecord) {
	c.Steps, c.Loss, c.LR = append(c.Steps, float64(r.Step)), append(c.Loss, r.Loss), append(c.LR, r.LR)
}

func addVal(c *report.Curves, r checkpoint.ValRecord) {
	c.ValSteps = append(c.ValSteps, float64(r.Step))
	c.ValLoss, c.MIoU = append(c.ValLoss, float64(r.ValLoss)), append(c.MIoU, r.ValMIoU)
	c.Dice, c.PixelAcc = append(c.Dice, r.ValDice), append(c.PixelAcc, r.ValPixelAcc)
}

// maxMetricsBytes bounds the metrics.jsonl ReadCurves reads (about two
// million steps).
const maxMetricsBytes = 1 << 30

// ReadCurves reads a run's metrics.jsonl as it is when opened. A run still
// writing may have left its last line half written: that line is left
// out. A step or validation recorded twice counts once, as last recorded.
func ReadCurves(path string) (report.Curves, error) {
	f, size, err := infile.Open(path, maxMetricsBytes)
	if err != nil {
		return report.Curves{}, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, size)) // what a writer adds meanwhile is for the next read
	if err != nil {
		return report.Curves{}, fmt.Errorf("%s: %w", path, err)
	}
	var steps byStep[StepRecord]
	var vals byStep[checkpoint.ValRecord]
	lines := bytes.Split(raw, []byte("\n"))
	for i, text := range lines {
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		torn := i == len(lines)-1 // no newline after it: still being written
		bad := func(err error) error { return fmt.Errorf("%s: line %d: %v", path, i+1, err) }
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(text, &kind); err != nil {
			if torn {
				break
			}
			return report.Curves{}, bad(err)
		}
		switch kind.Type {
		case "step":
			var r StepRecord
			if err := json.Unmarshal(text, &r); err != nil {
				return report.Curves{}, bad(err)
			}
			steps.put(r.Step, r)
		case "val":
			var r checkpoint.ValRecord
			if err := json.Unmarshal(text, &r); err != nil {
				return report.Curves{}, bad(err)
			}
			vals.put(r.Step, r)
		}
	}
	var c report.Curves
	for _, r := range steps.list {
		addStep(&c, r)
	}
	for _, r := range vals.list {
		addVal(&c, r)
	}
	return c, nil
}

// byStep are records in the order their steps first came, a later record
// of a step replacing the earlier.
type byStep[T any] struct {
	list []T
	at   map[int]int
}

func (b *byStep[T]) put(step int, r T) {
	if i, ok := b.at[step]; ok {
		b.list[i] = r
		return
	}
	if b.at == nil {
		b.at = map[int]int{}
	}
	b.at[step] = len(b.list)
	b.list = append(b.list, r)
}
