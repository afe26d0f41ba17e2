// Package hostmem is address space on the host that is backed page by
// page, as a GPU's virtual memory is: a reservation with no access (mmap
// PROT_NONE), ranges of it made readable and writable (mprotect) and given
// back (a fresh PROT_NONE mapping over them, which drops their memory and
// commit charge). The CPU backend's heaps and the CUDA emulator's device
// memory are both made of it.
//
// Invariants: a reservation is aligned to the alignment asked for; Map and
// Unmap take whole ranges of one reservation, which the caller owns;
// memory of an unmapped range reads as zero once mapped again, and touching
// it while unmapped faults. Linux only.
package hostmem
