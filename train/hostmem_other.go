//go:build !linux

package train

// HostMemory is 0 (unknown) where /proc/meminfo is not there.
func HostMemory() int64 { return 0 }
