//go:build !linux

package rundir

// PeakRSS is not measured outside Linux; summary.json then reports 0.
func PeakRSS() int64 { return 0 }
