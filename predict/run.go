package predict

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/outdir"
)

// Run predicts input (an image file, a directory of them, or
// dataset:<split>) into outDir: the masks and the outputs opts asks for,
// legend.png (each class's color) and predict.json (the returned report).
// note gets what the user should know before a large batch runs.
func (p *Predictor) Run(input, outDir string, opts Options, lim Limits, note io.Writer) (*Report, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Input: input, Precision: p.precision}
	if ck := p.Checkpoint; ck != nil {
		rep.Checkpoint, rep.Step, rep.TrainingValMIoU = ck.Dir, ck.Manifest.Step, ck.Manifest.ValMIoU
		if !opts.ClassIndices {
			rep.MaskValues = ck.Manifest.MaskValues
		}
	}
	var err error
	if split, ok := strings.CutPrefix(input, "dataset:"); ok {
		err = p.PredictSplitInto(split, outDir, opts, lim, rep)
	} else {
		err = p.PredictFiles(input, outDir, opts, lim, note, rep)
	}
	if err != nil {
		return nil, err
	}
	rep.PeakAllocatedBytes = p.Pool().Stats().Allocated.Peak
	for k := range p.Config.Model.Classes {
		e := LegendEntry{Class: k, Color: data.HexColor(data.ClassColor(uint8(k)))}
		if rep.MaskValues != nil {
			e.Value = &rep.MaskValues[k]
		}
		rep.Legend = append(rep.Legend, e)
	}
	if err := writePNG(filepath.Join(outDir, "legend.png"), data.Legend(p.Config.Model.Classes)); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := outdir.WriteBytes(filepath.Join(outDir, ReportName), append(js, '\n')); err != nil {
		return nil, err
	}
	return rep, nil
}

// ReportName is the report's file in the output folder.
const ReportName = "predict.json"
