//go:build !unix

package memlimit

// rlimit is unknown where the system has no rlimits.
func rlimit(string) (uint64, bool) { return 0, false }
