package memory

import "fmt"

// OutOfMemoryError is returned when an allocation would take reserved memory
// past the pool's capacity. Its message carries what PyTorch's does, plus Hint:
// the memunet option that would make the allocation fit, when the caller knows it.
type OutOfMemoryError struct {
	Requested           int64 // rounded bytes asked for
	Category            Category
	Capacity            int64
	Free                int64 // capacity minus reserved
	Allocated           int64 // bytes in live buffers
	ReservedUnallocated int64 // bytes cached by the pool, not in use
	Hint                string
	// Arena says the allocation was the arena: every buffer of the run at
	// once (memory.allocator: arena), not one of Category.
	Arena bool
	// Cause is the allocator's error when the memory itself ran out (it
	// wraps ErrExhausted) rather than the pool's capacity; nil otherwise.
	Cause error
}

// Unwrap is Cause.
func (e *OutOfMemoryError) Unwrap() error { return e.Cause }

func (e *OutOfMemoryError) Error() string {
	room := fmt.Sprintf("The pool has a total capacity of %s of which %s is free.", FormatBytes(e.Capacity), FormatBytes(e.Free))
	if e.Cause != nil {
		room = fmt.Sprintf("The memory itself is full (%v), after the pool gave back its cached blocks.", e.Cause)
	}
	what := e.Category.String()
	if e.Arena {
		what = "the arena, in which the plan placed every buffer of the run"
	}
	msg := fmt.Sprintf("out of memory: tried to allocate %s (%s). %s "+
		"Of the allocated memory %s is allocated by memunet, and %s is reserved by memunet but unallocated.",
		FormatBytes(e.Requested), what, room,
		FormatBytes(e.Allocated), FormatBytes(e.ReservedUnallocated))
	if e.Hint != "" {
		msg += " " + e.Hint
	}
	return msg
}

// FormatBytes writes n the way PyTorch's messages do: "32.00 MiB", "6.00 GiB",
// "0 bytes".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d bytes", n)
	}
	f := float64(n)
	for _, suffix := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit || suffix == "TiB" {
			return fmt.Sprintf("%.2f %s", f, suffix)
		}
	}
	panic("unreachable")
}
