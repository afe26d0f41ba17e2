package compare

import "syscall"

// childAttr starts a child in its own process group, to be sent SIGTERM
// should compare die first (which a train child takes as its stop: it
// saves, or after compare's own forwarded signal, exits at once).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
