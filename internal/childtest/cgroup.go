package childtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memunet/memunet/memlimit"
)

// MemoryCgroup makes a memory cgroup of limit bytes below this process's
// own (v2 or v1, whichever the machine mounts), removed when t ends, and
// returns its cgroup.procs file. It skips t with the reason where none can
// be made: no memory cgroup mounted, no permission, a v2 parent that does
// not delegate the memory controller.
func MemoryCgroup(t testing.TB, limit int64) string {
	t.Helper()
	parent, v2, ok := memlimit.MemoryCgroup()
	if !ok {
		t.Skip("no memory cgroup is mounted here")
	}
	dir := filepath.Join(parent, fmt.Sprintf("memunet-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_")))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup in %s: %v", parent, err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Logf("the test's cgroup %s stays: %v", dir, err)
		}
	})
	limitFile := "memory.limit_in_bytes"
	if v2 {
		limitFile = "memory.max"
		if _, err := os.Stat(filepath.Join(dir, limitFile)); err != nil {
			// Delegate the controller; refused where the parent holds
			// processes itself (v2's no-internal-process rule).
			if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
				t.Skipf("the v2 cgroup %s does not delegate the memory controller: %v", parent, err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot limit the cgroup %s: %v", dir, err)
	}
	return filepath.Join(dir, "cgroup.procs")
}

// InCgroup makes cmd join the cgroup whose cgroup.procs file is procs
// before its program starts: /bin/sh writes its own pid there and execs
// cmd's program with cmd's arguments, so nothing of the program runs
// outside the cgroup.
func InCgroup(cmd *exec.Cmd, procs string) {
	script := `echo $$ > "$0" && exec "$@"`
	cmd.Args = append([]string{"/bin/sh", "-c", script, procs, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
}
