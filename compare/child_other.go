//go:build !unix

package compare

import "syscall"

// childAttr leaves a child as the system starts it.
func childAttr() *syscall.SysProcAttr { return nil }
