package dist

import (
	"fmt"
	"os"
	"strconv"
)

// Comm is the ranks of one job and their collectives.
type Comm interface {
	// Rank is this process's place, 0..Size-1; rank 0 writes the run's files.
	Rank() int
	Size() int
	// AllReduceSum replaces buf on every rank by its element-wise sum over
	// the ranks.
	AllReduceSum(buf []float32) error
	AllReduceSum64(buf []float64) error
	// Broadcast copies root's buf into every rank's.
	Broadcast(buf []float32, root int) error
	Barrier() error
	// Name says what it is, e.g. "single process", "MPI (Open MPI 4.1.4)".
	Name() string
	Close() error
}

// Single is the one-process communicator: rank 0 of 1.
type Single struct{}

func (Single) Rank() int                      { return 0 }
func (Single) Size() int                      { return 1 }
func (Single) AllReduceSum([]float32) error   { return nil }
func (Single) AllReduceSum64([]float64) error { return nil }
func (Single) Broadcast(buf []float32, root int) error {
	if root != 0 {
		return fmt.Errorf("dist: broadcast from rank %d of 1", root)
	}
	return nil
}
func (Single) Barrier() error { return nil }
func (Single) Name() string   { return "single process" }
func (Single) Close() error   { return nil }

// launchedSize is the world size mpirun gave this process (Open MPI's
// OMPI_COMM_WORLD_SIZE, or PMI_SIZE for MPICH/Hydra), 1 when it was not
// launched by mpirun.
func launchedSize() int {
	for _, key := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"} {
		if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// Open is the communicator of this process: MPI's when it was launched by
// mpirun with more than one rank (a build without -tags mpi says so and
// how to build one), else Single.
func Open() (Comm, error) {
	if launchedSize() <= 1 {
		return Single{}, nil
	}
	return openMPI()
}

// Planned is a communicator that only says where a rank stands, for dry
// runs: a plan of rank Of's program in a world of Size ranks, whose
// collectives change nothing (the planning backend computes nothing).
type Planned struct{ Of, Ranks int }

func (p Planned) Rank() int                    { return p.Of }
func (p Planned) Size() int                    { return max(p.Ranks, 1) }
func (Planned) AllReduceSum([]float32) error   { return nil }
func (Planned) AllReduceSum64([]float64) error { return nil }
func (Planned) Broadcast([]float32, int) error { return nil }
func (Planned) Barrier() error                 { return nil }
func (p Planned) Name() string                 { return fmt.Sprintf("planned rank %d of %d", p.Of, p.Size()) }
func (Planned) Close() error                   { return nil }
