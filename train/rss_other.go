//go:build !linux

package train

// peakRSS is not measured outside Linux; summary.json then reports 0.
func peakRSS() int64 { return 0 }
