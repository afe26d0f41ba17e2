package main

import (
	"encoding/binary"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// npyFloats is a float32 .npy's values.
func npyFloats(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body := raw[10+int(binary.LittleEndian.Uint16(raw[8:10])):]
	out := make([]float32, len(body)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
	}
	return out
}

// TestPredictEnsemble: --checkpoint A,B predicts with the mean of the
// two runs' probabilities (each predicted alone), bit for bit, and the
// mask is its argmax; predict.json and the summary list both; an ensemble of one
// checkpoint (A,A, or "A,") predicts what A does; a run of other classes
// is refused naming both and the key; a split, eval of a list and an
// ensemble without --out are refused with what to do.
func TestPredictEnsemble(t *testing.T) {
	runA, sumA := trainTiny(t)
	runB, sumB := trainTiny(t, "--set", "model.seed=2", "--set", "train.seed=2")
	in := t.TempDir()
	writeShapes(t, filepath.Join(in, "a.png"), 0, 20, 24)
	predictProbs := func(ck string, more ...string) ([]float32, []uint8) {
		t.Helper()
		out := t.TempDir()
		runOK(t, append([]string{"predict", "--checkpoint", ck, "--input", in, "--out", out, "--probs", "npy"}, more...)...)
		m := readPNG(t, filepath.Join(out, "a.png")).(*image.Paletted)
		return npyFloats(t, filepath.Join(out, "a_probs.npy")), m.Pix
	}
	pa, ma := predictProbs(runA)
	pb, _ := predictProbs(runB)
	if slices.Equal(pa, pb) {
		t.Fatal("the two runs predict alike: no test of a mean")
	}
	pe, me := predictProbs(runA + "," + runB)
	const k, px = 4, 20 * 24
	for i := range px {
		best := 0
		for c := range k {
			if want := (pa[c*px+i] + pb[c*px+i]) / 2; pe[c*px+i] != want {
				t.Fatalf("pixel %d class %d: probability %v, the mean of the runs' %v", i, c, pe[c*px+i], want)
			}
			if pe[c*px+i] > pe[best*px+i] {
				best = c
			}
		}
		if int(me[i]) != best {
			t.Fatalf("pixel %d: class %d, the mean's argmax %d", i, me[i], best)
		}
	}
	for _, one := range []string{runA + "," + runA, runA + ","} {
		if p, m := predictProbs(one); !slices.Equal(p, pa) || !slices.Equal(m, ma) {
			t.Errorf("--checkpoint %s does not predict what %s does", one, runA)
		}
	}
	out := t.TempDir()
	said := runOK(t, "predict", "--checkpoint", runA+","+runB, "--input", in, "--out", out, "--keep-largest", "all")
	if !strings.Contains(said, "with an ensemble of 2 checkpoints ("+sumA.BestCheckpoint+" at step ") {
		t.Errorf("summary: %s", said)
	}
	rep := readReport(t, out)
	if len(rep.Members) != 2 || rep.Members[0].Checkpoint != sumA.BestCheckpoint || rep.Members[1].Checkpoint != sumB.BestCheckpoint ||
		rep.Checkpoint != sumA.BestCheckpoint || rep.Options.KeepLargest != "all" {
		t.Errorf("predict.json: checkpoint %s, members %+v, options %+v", rep.Checkpoint, rep.Members, rep.Options)
	}

	runC, sumC := trainTiny(t, "--set", "model.classes=3")
	code, _, stderr := runOut("predict", "--checkpoint", runA+","+runC, "--input", in, "--out", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "differ in model.classes (4 and 3)") || !strings.Contains(stderr, sumC.BestCheckpoint) || !strings.Contains(stderr, sumA.BestCheckpoint) {
		t.Errorf("members of other classes: exit %d, %s", code, stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"predict", "--checkpoint", runA + "," + runB, "--input", "dataset:val", "--out", t.TempDir()}, 1, "scores no split of a dataset"},
		{[]string{"predict", "--checkpoint", runA + "," + runB, "--input", in}, 2, "name the output with --out"},
		{[]string{"predict", "--checkpoint", runA, "--input", in, "--out", t.TempDir(), "--keep-largest", "one"}, 2, "--keep-largest \"one\""},
		{[]string{"predict", "--checkpoint", runA, "--input", in, "--out", t.TempDir(), "--keep-largest", "7"}, 1, "class 7: the model's classes are 0..3"},
		{[]string{"eval", "--checkpoint", runA + "," + runB}, 1, "an ensemble, which memunet predict averages"},
	} {
		if code, _, stderr := runOut(tc.args...); code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s", tc.args, code, stderr)
		}
	}
}
