// Package dist is what a data-parallel run needs of its processes: each
// rank's place (Rank, Size) and the collectives over them (all-reduce,
// broadcast, barrier), behind one interface, Comm.
//
// The default build has one implementation, Single: one process, whose
// collectives change nothing. Built with -tags mpi (cgo, OpenMPI found by
// pkg-config ompi-c), Open returns an MPI communicator when the process was
// started by mpirun: every MPI call is made from one goroutine locked to
// its OS thread (MPI_THREAD_FUNNELED), which the methods hand their work
// to. An NCCL communicator (GPU to GPU) would be another Comm, with the
// same buffers in device memory.
//
// Invariants: every rank calls the same collectives in the same order with
// the same lengths (the trainer does: the same program on every rank);
// buffers are host memory owned by the caller and changed in place.
package dist
