//go:build mpi

package dist

import (
	"testing"
)

// TestMPICollectives runs under mpirun -np 2 (or more; .ci/run does it):
// the sum of every rank's values, and rank 1's buffer broadcast to all.
func TestMPICollectives(t *testing.T) {
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() < 2 {
		t.Skip("run with mpirun -np 2")
	}
	r, n := float32(c.Rank()), c.Size()
	buf := []float32{r, 1, r * r}
	if err := c.AllReduceSum(buf); err != nil {
		t.Fatal(err)
	}
	var sumR, sumR2 float32
	for i := range n {
		sumR += float32(i)
		sumR2 += float32(i * i)
	}
	if buf[0] != sumR || buf[1] != float32(n) || buf[2] != sumR2 {
		t.Errorf("rank %d: all-reduce %v, want [%v %v %v]", c.Rank(), buf, sumR, n, sumR2)
	}
	b64 := []float64{float64(c.Rank()) + 0.5}
	if err := c.AllReduceSum64(b64); err != nil || b64[0] != float64(sumR)+0.5*float64(n) {
		t.Errorf("rank %d: all-reduce64 %v, %v", c.Rank(), b64, err)
	}
	bc := []float32{r, r + 1}
	if err := c.Broadcast(bc, 1); err != nil || bc[0] != 1 || bc[1] != 2 {
		t.Errorf("rank %d: broadcast from 1: %v, %v", c.Rank(), bc, err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
