//go:build unix && !linux

package compare

import "syscall"

// childAttr starts a child in its own process group (these systems have
// no parent-death signal: a compare that dies at once leaves its child).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
