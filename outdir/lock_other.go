//go:build !unix

package outdir

const (
	noFollow = 0
	nonBlock = 0
)

// acquireFlock: no flock here; the lock file it is.
func acquireFlock(string, Holder) (*Lock, error) { return nil, errNoFlock }

// running cannot tell here: a lock file is never taken as stale.
func running(int) bool { return true }
