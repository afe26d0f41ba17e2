//go:build unix

package memlimit

import "syscall"

// rlimit is the process's soft RLIMIT_AS or RLIMIT_DATA.
func rlimit(kind string) (uint64, bool) {
	resource := syscall.RLIMIT_AS
	if kind == KindData {
		resource = syscall.RLIMIT_DATA
	}
	var r syscall.Rlimit
	if err := syscall.Getrlimit(resource, &r); err != nil || r.Cur >= unlimited {
		return 0, false
	}
	return r.Cur, true
}
