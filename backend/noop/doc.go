// Package noop is the planning backend: the same layer code as a real run,
// on a pool over memory.Virtual, computing nothing. A step run through it
// makes exactly the allocations of the same step on its target backend, so
// the pool's statistics are the target's, byte for byte: memunet plan, fit
// and compare's planned column. Sizes come from the target (its Sizer), since
// workspaces differ between backends.
//
// Its buffers have no memory at all, so a layer, optimizer or trainer that
// reads or writes a buffer other than through its backend fails on it (the
// CPU backend panics on a virtual buffer): running full steps through noop
// is the test that nothing outside a backend touches device memory.
package noop
