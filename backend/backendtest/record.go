package backendtest

import (
	"errors"
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
)

// testStepRecorder holds a backend's step record (backend.StepRecorder)
// to the operations it stands for, bit for bit: the slots' sums and counts
// are CrossEntropy's, RecordedCrossEntropyBack writes what
// CrossEntropyBack writes with k = scale/float32(count), the record's
// finite flag is UnscaleCheck's answer (gradients unscaled alike), all
// read in one copy; a bad target in a slot is its *TargetError, and an
// all-ignored slot's count 0 gives k 0.
func (s *suite) testStepRecorder(t *testing.T, r backend.StepRecorder) {
	shapes := []backend.Shape4{{N: 2, C: 4, H: 3, W: 5}, {N: 3, C: 4, H: 2, W: 2}, {N: 1, C: 4, H: 1, W: 3}}
	for _, dt := range s.layerTypes(backend.OpLoss) {
		s.run(t, dt.String(), func(c *check) {
			var logits, targets []backend.View
			for i, sh := range shapes {
				tg := c.targets(sh.N*sh.H*sh.W, sh.C)
				if i == 2 {
					for j := range tg {
						tg[j] = backend.IgnoreIndex
					}
				}
				logits, targets = append(logits, c.input(dt, c.uniform(sh.Len(), -3, 3))), append(targets, c.inputBytes(tg))
				r.RecordCrossEntropy(sh, logits[i], targets[i], i)
			}
			const scale = 0.75
			var got, want []backend.View
			for i, sh := range shapes {
				g := c.output(dt, sh.Len())
				r.RecordedCrossEntropyBack(sh, g, logits[i], targets[i], i, scale)
				got = append(got, g)
			}
			grad := []float32{1, -2, float32(math.Inf(1)), 4}
			gs := []backend.View{c.input(backend.Float32, grad[:2]), c.input(backend.Float32, grad[2:])}
			r.RecordUnscaleCheck(gs, 0.5)
			sums, counts, finite, err := r.ReadRecord(len(shapes), 4)
			if err != nil || len(sums) != len(shapes) || len(counts) != len(shapes) {
				c.Fatalf("ReadRecord: %v, %v, %v", sums, counts, err)
			}
			if finite {
				c.Errorf("a gradient holds +Inf, the record says finite")
			}
			c.same("unscaled gradients", append(c.get(gs[0]), c.get(gs[1])...), []float32{0.5, -1, float32(math.Inf(1)), 2})
			for i, sh := range shapes {
				sum, count, err := s.b.CrossEntropy(sh, logits[i], targets[i])
				if err != nil || math.Float64bits(sum) != math.Float64bits(sums[i]) || count != counts[i] {
					c.Errorf("slot %d: sum %v count %d; CrossEntropy %v %d (%v)", i, sums[i], counts[i], sum, count, err)
				}
				var k float32
				if count > 0 {
					k = scale / float32(count)
				}
				g := c.output(dt, sh.Len())
				s.b.CrossEntropyBack(sh, g, logits[i], targets[i], k)
				want = append(want, g)
				c.same("dlogits", c.get(got[i]), c.get(want[i]))
			}
			if counts[2] != 0 {
				c.Errorf("an all-ignored slot counts %d", counts[2])
			}
			// Finite gradients, and a bad target in slot 1's sample 2.
			r.RecordUnscaleCheck(gs[:1], 1)
			if _, _, finite, err := r.ReadRecord(1, 4); err != nil || !finite {
				c.Errorf("finite gradients: finite %v, %v", finite, err)
			}
			sh := shapes[1]
			tg := c.targets(sh.N*sh.H*sh.W, sh.C)
			tg[2*sh.H*sh.W+1] = 9
			r.RecordCrossEntropy(sh, logits[1], c.inputBytes(tg), 1)
			var te *backend.TargetError
			if _, _, _, err := r.ReadRecord(2, sh.C); !errors.As(err, &te) || te.Value != 9 || te.Sample != 2 || te.Classes != sh.C {
				c.Errorf("a bad target: %v; want value 9 in sample 2 of %d classes", err, sh.C)
			}
		})
	}
}
