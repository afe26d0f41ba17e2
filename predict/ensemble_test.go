package predict

import (
	"encoding/binary"
	"image"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
)

// tinyConfig is tinyPredictor's model (3 classes, depth 2, base 4) with
// weights drawn from seed.
func tinyConfig(seed uint64) config.Config {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes, cfg.Model.Seed = 4, 2, 3, seed
	cfg.Data.Size = 16
	return cfg
}

// tiny3DConfig is tiny3D's model (3 classes, 16^3 windows) with weights
// drawn from seed.
func tiny3DConfig(seed uint64) config.Config {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes, cfg.Model.InChannels, cfg.Model.Dims = 2, 1, 3, 1, 3
	cfg.Model.Seed, cfg.Data.Size = seed, 16
	return cfg
}

// ensembleOf is the ensemble of the models of cfgs, in one pool, and
// each model alone in a pool of its own, all fp32, batches of 2, closed
// at the test's end.
func ensembleOf(t testing.TB, cfgs ...config.Config) (*Predictor, []*Predictor) {
	t.Helper()
	var alone []*Predictor
	for _, cfg := range cfgs {
		p, err := newPredictor(cfg, cpu.New(), backend.Float32, 0, 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		alone = append(alone, p)
	}
	e, err := newPredictor(cfgs[0], cpu.New(), backend.Float32, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	for _, cfg := range cfgs[1:] {
		if err := e.addMember(cfg, nil); err != nil {
			t.Fatal(err)
		}
	}
	return e, alone
}

// meanOf is the mean of the models' probabilities computed apart, as
// the ensemble adds them: in order, in float32, then divided.
func meanOf(probs ...[]float32) []float32 {
	sum := slices.Clone(probs[0])
	for _, q := range probs[1:] {
		for i, v := range q {
			sum[i] += v
		}
	}
	for i := range sum {
		sum[i] /= float32(len(probs))
	}
	return sum
}

// TestEnsembleProbabilities: an ensemble's probabilities are the mean of
// its models' computed apart (Probabilities of each), bit for bit, with
// and without flip averaging, and its classes their argmax; an ensemble
// of one model is that model; its plan counts every model's weights and
// is the pool's peak, byte for byte.
func TestEnsembleProbabilities(t *testing.T) {
	const n, h, w, k = 2, 12, 16, 3
	images := make([]float32, n*3*h*w)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range images {
		images[i] = float32(rng.NormFloat64())
	}
	one, alone1 := ensembleOf(t, tinyConfig(1))
	e, alone := ensembleOf(t, tinyConfig(1), tinyConfig(2))
	for _, flip := range []bool{false, true} {
		var each [][]float32
		for _, p := range alone {
			q, err := p.Probabilities(images, n, h, w, flip)
			if err != nil {
				t.Fatal(err)
			}
			each = append(each, q)
		}
		if slices.Equal(each[0], each[1]) {
			t.Fatal("the two models agree everywhere: no test of a mean")
		}
		got, err := e.Probabilities(images, n, h, w, flip)
		if err != nil {
			t.Fatal(err)
		}
		if want := meanOf(each...); !slices.Equal(got, want) {
			t.Errorf("flip %v: the ensemble's probabilities are not the mean of its models'", flip)
		}
		if got, _ := one.Probabilities(images, n, h, w, flip); !slices.Equal(got, each[0]) {
			t.Errorf("flip %v: an ensemble of one is not its model", flip)
		}
	}
	mean := meanOf(mustProbs(t, alone[0], images), mustProbs(t, alone[1], images))
	if got, err := e.Predict(images, n, h, w); err != nil || !slices.Equal(got, Argmax(mean, n, k, h, w)) {
		t.Errorf("the ensemble's classes are not the argmax of the mean (%v)", err)
	}
	want, _ := alone1[0].Predict(images, n, h, w)
	if got, _ := one.Predict(images, n, h, w); !slices.Equal(got, want) {
		t.Error("an ensemble of one predicts other classes than its model")
	}

	fresh, _ := ensembleOf(t, tinyConfig(1), tinyConfig(2))
	need, err := fresh.PlanBatch(n, h, w, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	single, _ := alone[0].PlanBatch(n, h, w, 0, false)
	if _, err := fresh.Predict(images, n, h, w); err != nil {
		t.Fatal(err)
	}
	st := fresh.Pool().Stats()
	if need.PeakAllocated != st.Allocated.Peak || need.PeakReserved != st.Reserved.Peak || need.PeakAllocated <= single.PeakAllocated {
		t.Errorf("planned allocated %d reserved %d (one model %d), measured %d and %d",
			need.PeakAllocated, need.PeakReserved, single.PeakAllocated, st.Allocated.Peak, st.Reserved.Peak)
	}
}

func mustProbs(t *testing.T, p *Predictor, images []float32) []float32 {
	t.Helper()
	q, err := p.Probabilities(images, 2, 12, 16, false)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// readNpy is a float32 .npy's values.
func readNpy(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hl := int(binary.LittleEndian.Uint16(raw[8:10]))
	body := raw[10+hl:]
	out := make([]float32, len(body)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
	}
	return out
}

// readClasses is a palette mask's classes, row by row.
func readClasses(t *testing.T, path string) []uint8 {
	t.Helper()
	m, ok := readPNG(t, path).(*image.Paletted)
	if !ok {
		t.Fatalf("%s is not a palette PNG", path)
	}
	b := m.Bounds()
	var out []uint8
	for y := range b.Dy() {
		out = append(out, m.Pix[y*m.Stride:y*m.Stride+b.Dx()]...)
	}
	return out
}

// TestEnsembleRunFiles: predicting an image file, an ensemble's
// probabilities (--probs npy) are the mean of its models' (each run
// alone), bit for bit whole and within float32 rounding by tiles (blended
// after the mean), and its mask their argmax; predict.json says the
// models were averaged.
func TestEnsembleRunFiles(t *testing.T) {
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 48, 32)
	const k, h, w = 3, 32, 48
	e, alone := ensembleOf(t, tinyConfig(1), tinyConfig(2))
	for _, tile := range []string{TileNone, "16"} {
		opts := Options{Probs: "npy", Tile: tile, Overlap: 0.5}
		var each [][]float32
		for _, p := range alone {
			out := t.TempDir()
			if _, err := p.Run(filepath.Join(in, "a.png"), out, opts, Limits{}, nil); err != nil {
				t.Fatal(err)
			}
			each = append(each, readNpy(t, filepath.Join(out, "a_probs.npy")))
		}
		out := t.TempDir()
		var note strings.Builder
		if _, err := e.Run(filepath.Join(in, "a.png"), out, opts, Limits{}, &note); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(note.String(), "an ensemble of 2 checkpoints") {
			t.Errorf("note: %q", note.String())
		}
		got, mask := readNpy(t, filepath.Join(out, "a_probs.npy")), readClasses(t, filepath.Join(out, "a.png"))
		want := meanOf(each...)
		if len(got) != k*h*w || len(mask) != h*w {
			t.Fatalf("tile %s: %d probabilities, %d classes", tile, len(got), len(mask))
		}
		worst := 0.0
		for i := range got {
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		if tile == TileNone && worst != 0 || worst > 1e-6 {
			t.Errorf("tile %s: probabilities differ from the mean of the models' by %g", tile, worst)
		}
		if classes := Argmax(got, 1, k, h, w); !slices.Equal(mask, classes) {
			t.Errorf("tile %s: the mask is not the argmax of the mean", tile)
		}
	}
}

// TestEnsembleVolume3D: a 3D UNet ensemble's window is the mean of its
// models' softmax probabilities computed apart, bit for bit; streamed
// over a volume, blended, it gives the whole-volume reference's classes
// (wholeVolume3D of those means) but at near ties; its plan counts the
// second model and holds the pool's peak.
func TestEnsembleVolume3D(t *testing.T) {
	e, alone := ensembleOf(t, tiny3DConfig(3), tiny3DConfig(5))
	const side, k = 16, 3
	v := side * side * side
	window := make([]float32, v)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range window {
		window[i] = float32(rng.NormFloat64())
	}
	var each [][]float32
	for _, p := range alone {
		out, err := p.volumeLogits(make([]float32, k*v), window, side, side, side)
		if err != nil {
			t.Fatal(err)
		}
		softmaxPlanes(out, 1, k, v)
		each = append(each, out)
	}
	got, err := e.windowOutputs(make([]float32, k*v), make([]float32, k*v), window, side, side, side)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, meanOf(each...)) {
		t.Error("a window's outputs are not the mean of its models' probabilities")
	}

	dir := t.TempDir()
	in := filepath.Join(dir, "v.nii.gz")
	writeVolume(t, in, 29, 23, 21)
	out := t.TempDir()
	rep, err := e.Run(in, out, Options{Overlap: 0.5, Blend: "gaussian"}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vol, err := data.ReadVolume(filepath.Join(out, "v.nii.gz"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, margin := wholeVolume3D(t, e, []string{in}, side, 0.5, "gaussian")
	seen, close := map[uint8]int{}, 0
	for at, c := range want {
		seen[c]++
		if float64(c) == vol.At(at) {
			continue
		}
		if margin[at] > 1e-5 {
			t.Fatalf("voxel %d is class %g, the reference's %d (margin %.3g)", at, vol.At(at), c, margin[at])
		}
		close++
	}
	if len(seen) < 2 || close > len(want)/1000 {
		t.Errorf("classes %v, %d near ties differ", seen, close)
	}
	single, _, err := alone[0].planVolume(vol.Dims, [3]int{side, side, side}, 0.5, 1, int64(2*29*23), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PlannedPeakBytes <= single.PeakAllocated || rep.PeakAllocatedBytes > rep.PlannedPeakBytes {
		t.Errorf("planned pool peak %d (one model %d), measured %d", rep.PlannedPeakBytes, single.PeakAllocated, rep.PeakAllocatedBytes)
	}
}

// TestEnsembleRefusesMismatch: a model that takes other inputs, prepares
// them otherwise or gives other classes is refused, naming the key; one
// of another width is not.
func TestEnsembleRefusesMismatch(t *testing.T) {
	e, _ := ensembleOf(t, tinyConfig(1))
	for key, change := range map[string]func(*config.Config){
		"model.classes":        func(c *config.Config) { c.Model.Classes = 4 },
		"model.in_channels":    func(c *config.Config) { c.Model.InChannels = 1 },
		"model.depth":          func(c *config.Config) { c.Model.Depth = 3 },
		"data.mean":            func(c *config.Config) { c.Data.Mean = []float64{0.4} },
		"data.std":             func(c *config.Config) { c.Data.Std = []float64{0.2} },
		"data.resize":          func(c *config.Config) { c.Data.Resize = []int{32, 32} },
		"data.nifti.window":    func(c *config.Config) { c.Data.NIfTI.Window = []float64{-100, 300} },
		"data.nifti.normalize": func(c *config.Config) { c.Data.NIfTI.Normalize = data.NormalizeZScore },
		"data.background":      func(c *config.Config) { c.Data.Background = 1 },
		"data.class_names":     func(c *config.Config) { c.Data.ClassNames = []string{"a", "b", "c"} },
	} {
		cfg := tinyConfig(2)
		change(&cfg)
		err := e.addMember(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "differ in "+key) {
			t.Errorf("%s: %v", key, err)
		}
	}
	if e.Ensemble() != 1 {
		t.Fatalf("refused members were added: %d models", e.Ensemble())
	}
	wider := tinyConfig(2)
	wider.Model.Base = 8
	if err := e.addMember(wider, nil); err != nil || e.Ensemble() != 2 {
		t.Errorf("a wider member: %v", err)
	}
}

// TestEnsembleRefusesSplits: an ensemble scores no dataset split, and
// --keep-largest applies to files and volumes only.
func TestEnsembleRefusesSplits(t *testing.T) {
	e, alone := ensembleOf(t, tinyConfig(1), tinyConfig(2))
	if _, err := e.Run("dataset:val", t.TempDir(), Options{Overlap: -1}, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "an ensemble of 2 checkpoints scores no split") {
		t.Errorf("an ensemble on dataset:val: %v", err)
	}
	if _, _, err := e.Score("val", false, Limits{}); err == nil {
		t.Error("an ensemble scored a split")
	}
	if _, err := alone[0].Run("dataset:val", t.TempDir(), Options{Overlap: -1, KeepLargest: "1"}, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "--keep-largest applies to image files and volumes") {
		t.Errorf("--keep-largest on dataset:val: %v", err)
	}
}
