//go:build !mpi

package dist

import "fmt"

// openMPI explains that this build has no MPI.
func openMPI() (Comm, error) {
	return nil, fmt.Errorf("dist: started by mpirun with %d ranks, but this memunet was built without MPI: build it with go build -tags mpi ./cmd/memunet (needs cgo and Open MPI's libopenmpi-dev)", launchedSize())
}

// mpiBuilt reports a build with -tags mpi.
const mpiBuilt = false
