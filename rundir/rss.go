//go:build linux

package rundir

import "syscall"

// PeakRSS is the process's peak resident set size in bytes (Linux reports
// ru_maxrss in KiB), or 0 where it cannot be read.
func PeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Maxrss) * 1024
}
