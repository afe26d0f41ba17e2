//go:build linux

package train

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// HostMemory is the memory the host can give a new run without swapping:
// MemAvailable of /proc/meminfo, in bytes (0 where it cannot be read).
func HostMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
