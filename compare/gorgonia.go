package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/model/oracle"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/runfiles"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GorgoniaSummary is what the plain-gorgonia reference run (memunet
// gorgonia) writes: the numbers compare puts beside memunet's variants.
type GorgoniaSummary struct {
	Steps        int     `json:"steps"`
	FinalLoss    float64 `json:"final_loss"`
	StepMSMedian float64 `json:"step_ms_median"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	BuildSeconds float64 `json:"build_s"`
	WallSeconds  float64 `json:"wall_s"`
}

// RunGorgonia trains cfg's UNet for steps optimizer steps as plain
// gorgonia would: the network as an ExprGraph (model/oracle, float32,
// same weights, data order and Adam settings as memunet) with symbolic
// gradients, a TapeMachine and gorgonia's Adam solver. It calls onStep
// after each step (its 1-based number, the loss and the step's time) and
// writes the summary as summary.json into outDir: compare's reference row.
// outDir is held under its lock throughout; one that holds a run is
// refused before anything runs (claimGorgoniaOut).
func RunGorgonia(cfg config.Config, steps int, outDir string, onStep func(step int, loss, ms float64)) error {
	start := time.Now()
	if cfg.Data.Source != "synthetic" {
		return fmt.Errorf("gorgonia: the reference run uses the synthetic data; data.source is %q", cfg.Data.Source)
	}
	if cfg.Model.Volumes() {
		return fmt.Errorf("gorgonia: the reference run is a 2D UNet (gorgonia's convolutions are 2D); model.dims is 3")
	}
	lock, err := claimGorgoniaOut(outDir)
	if err != nil {
		return err
	}
	defer lock.Clear() // no lock file stays beside the summary
	ds, err := data.NewSynthetic(data.SyntheticConfig{
		Count: cfg.Data.Count, Size: cfg.Data.Size, Classes: cfg.Model.Classes, Seed: cfg.Data.Seed, Noise: cfg.Data.Noise,
	})
	if err != nil {
		return err
	}
	// The weights come from memunet's initialization on a throwaway device.
	net, err := model.New(model.NewDevice(cpu.New(), memory.Options{}), cfg.ModelConfig(), cfg.Model.Seed)
	if err != nil {
		return err
	}
	batch := cfg.Train.BatchSize * cfg.Train.Accumulate
	H, W := ds.Size()
	shape := [4]int{batch, ds.Channels(), H, W}
	images, masks := make([]float32, batch*ds.Channels()*H*W), make([]uint8, batch*H*W)
	trainIdx, _ := cfg.Data.RandomSplit(ds.Len())
	if len(trainIdx) < batch {
		return fmt.Errorf("gorgonia: %d training samples for a batch of %d", len(trainIdx), batch)
	}
	perEpoch := len(trainIdx) / batch
	fill := func(step int) error {
		order := data.Shuffle(trainIdx, cfg.Train.Seed, step/perEpoch)
		pos := step % perEpoch
		return data.FillBatch(ds, order[pos*batch:(pos+1)*batch], images, masks)
	}
	if err := fill(0); err != nil {
		return err
	}
	g, err := oracle.BuildUNet(net, shape, images, masks, tensor.Float32)
	if err != nil {
		return err
	}
	if _, err := g.Grad(); err != nil {
		return err
	}
	learnables := make(G.Nodes, len(g.Names))
	for i, name := range g.Names {
		learnables[i] = g.Params[name]
	}
	vm := G.NewTapeMachine(g.G, G.BindDualValues(learnables...))
	defer vm.Close()
	solver := G.NewAdamSolver(G.WithLearnRate(cfg.Train.LR), G.WithBeta1(cfg.Train.Betas[0]),
		G.WithBeta2(cfg.Train.Betas[1]), G.WithEps(cfg.Train.Eps))
	sum := GorgoniaSummary{BuildSeconds: time.Since(start).Seconds()}
	var stepMS []float64
	for step := 0; step < steps; step++ {
		t0 := time.Now()
		if step > 0 {
			if err := fill(step); err != nil {
				return err
			}
			if err := g.SetBatch(images, masks); err != nil {
				return err
			}
		}
		if err := vm.RunAll(); err != nil {
			return fmt.Errorf("gorgonia: step %d: %w", step+1, err)
		}
		loss, err := oracle.ValueFloat64s(g.Loss.Value())
		if err != nil {
			return err
		}
		if err := solver.Step(G.NodesToValueGrads(learnables)); err != nil {
			return fmt.Errorf("gorgonia: solver step %d: %w", step+1, err)
		}
		vm.Reset()
		stepMS = append(stepMS, float64(time.Since(t0).Microseconds())/1000)
		sum.Steps, sum.FinalLoss = step+1, loss[0]
		onStep(step+1, loss[0], stepMS[len(stepMS)-1])
	}
	slices.Sort(stepMS)
	sum.StepMSMedian = stepMS[len(stepMS)/2]
	sum.PeakRSSBytes = rundir.PeakRSS()
	sum.WallSeconds = time.Since(start).Seconds()
	out, _ := json.MarshalIndent(sum, "", "  ")
	return outdir.WriteBytes(filepath.Join(outDir, runfiles.Summary), append(out, '\n'))
}

// claimGorgoniaOut locks outDir for the reference run and refuses one that
// holds a run's files (*rundir.ExistingRunError), unless the only one is
// the summary.json an earlier reference run wrote there: compare into the
// same --out again runs its gorgonia child into the same DIR/gorgonia.
func claimGorgoniaOut(outDir string) (*outdir.Lock, error) {
	lock, err := outdir.Acquire(outDir, "memunet gorgonia")
	if err != nil {
		return nil, err
	}
	err = rundir.CheckNoRun(outDir, "gorgonia")
	if ex := (*rundir.ExistingRunError)(nil); errors.As(err, &ex) &&
		slices.Equal(ex.Files, []string{runfiles.Summary}) && isGorgoniaSummary(filepath.Join(outDir, runfiles.Summary)) {
		err = nil
	}
	if err != nil {
		lock.Clear()
		return nil, err
	}
	return lock, nil
}

// isGorgoniaSummary reports whether path is a summary.json that RunGorgonia
// wrote: a JSON object with exactly GorgoniaSummary's keys (train's summary
// has many more).
func isGorgoniaSummary(path string) bool {
	raw, err := infile.ReadFile(path, 64<<10)
	var got, want map[string]json.RawMessage
	if err != nil || json.Unmarshal(raw, &got) != nil {
		return false
	}
	zero, _ := json.Marshal(GorgoniaSummary{})
	if json.Unmarshal(zero, &want) != nil || len(got) != len(want) {
		return false
	}
	for key := range want {
		if _, ok := got[key]; !ok {
			return false
		}
	}
	return true
}
