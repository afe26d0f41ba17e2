package dist

import (
	"strings"
	"testing"
)

// TestSingle: one process is rank 0 of 1 and its collectives change
// nothing; broadcasting from another rank is an error.
func TestSingle(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "")
	t.Setenv("PMI_SIZE", "")
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(Single); !ok || c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("Open outside mpirun: %T rank %d of %d", c, c.Rank(), c.Size())
	}
	buf := []float32{1, -2, 3}
	if err := c.AllReduceSum(buf); err != nil || buf[0] != 1 || buf[1] != -2 || buf[2] != 3 {
		t.Errorf("all-reduce of one rank: %v, %v", buf, err)
	}
	if err := c.Broadcast(buf, 1); err == nil {
		t.Errorf("broadcast from rank 1 of 1 succeeded")
	}
}

// TestOpenUnderMPIRunWithoutMPI: a build without -tags mpi started by
// mpirun with 2 ranks says how to build one, instead of training twice.
func TestOpenUnderMPIRunWithoutMPI(t *testing.T) {
	if mpiBuilt {
		t.Skip("built with MPI")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	_, err := Open()
	if err == nil || !strings.Contains(err.Error(), "-tags mpi") {
		t.Errorf("Open under mpirun without MPI: %v", err)
	}
}
