package memlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// fakeSystem writes files (slash paths from the root) into a temporary
// root and returns the System reading it, with rlimits from lims.
func fakeSystem(t *testing.T, files map[string]string, lims map[string]uint64) System {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return System{Root: root, Rlimit: func(kind string) (uint64, bool) {
		v, ok := lims[kind]
		return v, ok
	}}
}

const meminfo22G = "MemTotal:       23000000 kB\nMemFree:        1000 kB\nMemAvailable:   22000000 kB\n"

func TestRead(t *testing.T) {
	v1Mounts := "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"36 31 0:33 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	v2Mounts := "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		lims  map[string]uint64
		want  int64
		kind  string // the binding bound's
		where string
	}{
		{"meminfo only", map[string]string{"proc/meminfo": meminfo22G}, nil, 22000000 * kib, KindMeminfo, "/proc/meminfo"},
		{"nothing readable", nil, nil, 0, "", ""},
		{"cgroup v2 job of 8 GiB", map[string]string{
			"proc/meminfo":                                  meminfo22G,
			"proc/self/mountinfo":                           v2Mounts,
			"proc/self/cgroup":                              "0::/slurm/job7/step0\n",
			"sys/fs/cgroup/slurm/job7/memory.max":           "8589934592\n",
			"sys/fs/cgroup/slurm/job7/memory.current":       "1073741824\n",
			"sys/fs/cgroup/slurm/job7/memory.stat":          "anon 805306368\ninactive_file 268435456\n",
			"sys/fs/cgroup/slurm/job7/step0/memory.max":     "max\n",
			"sys/fs/cgroup/slurm/job7/step0/memory.current": "1000\n",
		}, nil, 8*gib - 768*mib, KindCgroupV2, "/sys/fs/cgroup/slurm/job7"},
		{"cgroup v2: the ancestor binds", map[string]string{
			"proc/meminfo":                        meminfo22G,
			"proc/self/mountinfo":                 v2Mounts,
			"proc/self/cgroup":                    "0::/pod/c1\n",
			"sys/fs/cgroup/pod/memory.max":        "2147483648",
			"sys/fs/cgroup/pod/memory.current":    "1610612736",
			"sys/fs/cgroup/pod/c1/memory.max":     "4294967296",
			"sys/fs/cgroup/pod/c1/memory.current": "536870912",
		}, nil, 512 * mib, KindCgroupV2, "/sys/fs/cgroup/pod"},
		{"cgroup v1 memory hierarchy", map[string]string{
			"proc/meminfo":        meminfo22G,
			"proc/self/mountinfo": v1Mounts,
			"proc/self/cgroup":    "9:name=systemd:/\n4:memory:/docker/abc\n1:cpu:/\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes":            "5000000000\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "104857600\n",
			"sys/fs/cgroup/memory/docker/abc/memory.stat":           "cache 0\ninactive_file 999\ntotal_inactive_file 52428800\n",
		}, nil, gib - 50*mib, KindCgroupV1, "/sys/fs/cgroup/memory/docker/abc"},
		{"cgroup v1 namespaced: the mount shows the group", map[string]string{
			"proc/meminfo":        meminfo22G,
			"proc/self/mountinfo": "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,cpuset,memory\n",
			"proc/self/cgroup":    "4:cpuset,memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912",
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "0",
		}, nil, 512 * mib, KindCgroupV1, "/sys/fs/cgroup/memory"},
		{"a mount point with a space", map[string]string{
			"proc/self/mountinfo":               "35 31 0:32 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n",
			"proc/self/cgroup":                  "0::/a\n",
			"sys/fs/my cgroup/a/memory.max":     "1048576",
			"sys/fs/my cgroup/a/memory.current": "0",
		}, nil, mib, KindCgroupV2, "/sys/fs/my cgroup/a"},
		{"ulimit -v", map[string]string{
			"proc/meminfo":     meminfo22G,
			"proc/self/status": "Name:\tmemunet\nVmPeak:\t 2000000 kB\nVmSize:\t 1000000 kB\nVmRSS:\t 30000 kB\nVmData:\t 500000 kB\n",
		}, map[string]uint64{KindAddressSpace: 4000000 << 10}, 3000000 * kib, KindAddressSpace, "/proc/self/status"},
		{"ulimit -d", map[string]string{
			"proc/meminfo":     meminfo22G,
			"proc/self/status": "VmSize:\t 1000000 kB\nVmData:\t 500000 kB\n",
		}, map[string]uint64{KindAddressSpace: 1 << 40, KindData: 600000 << 10}, 100000 * kib, KindData, "/proc/self/status"},
		{"nothing left is still known", map[string]string{
			"proc/self/mountinfo":               v2Mounts,
			"proc/self/cgroup":                  "0::/full\n",
			"sys/fs/cgroup/full/memory.max":     "1048576",
			"sys/fs/cgroup/full/memory.current": "2097152",
		}, nil, 1, KindCgroupV2, "/sys/fs/cgroup/full"},
		{"garbage is no limit", map[string]string{
			"proc/meminfo":               "MemAvailable: lots kB\n",
			"proc/self/mountinfo":        "not a mount\n- cgroup2\n",
			"proc/self/cgroup":           "junk\n0::/x\n",
			"sys/fs/cgroup/x/memory.max": "-5",
		}, nil, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fakeSystem(t, tc.files, tc.lims).Read()
			if l.Bytes != tc.want {
				t.Errorf("Bytes %d, want %d (%v)", l.Bytes, tc.want, l)
			}
			if tc.kind == "" {
				if len(l.Bounds) != 0 || !strings.Contains(l.String(), "unknown") {
					t.Errorf("bounds %v, string %q: want none, unknown", l.Bounds, l)
				}
				return
			}
			if b := l.Bounds[0]; b.Kind != tc.kind || b.Where != tc.where {
				t.Errorf("binding bound %s at %s, want %s at %s", b.Kind, b.Where, tc.kind, tc.where)
			}
			if s := l.String(); !strings.Contains(s, tc.kind) || strings.HasPrefix(tc.kind, "cgroup") && !strings.Contains(s, tc.where) {
				t.Errorf("String %q names neither %s nor %s", s, tc.kind, tc.where)
			}
			if l.Budget() > l.Bytes || l.Bytes > 4 && l.Budget() < l.Bytes/2 {
				t.Errorf("Budget %d of %d", l.Budget(), l.Bytes)
			}
		})
	}
}

// TestReadHere: this machine's own limit is read and, where /proc is,
// is known and no more than MemAvailable.
func TestReadHere(t *testing.T) {
	l := Read()
	t.Logf("this process may take %v", l)
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo here")
	}
	if l.Bytes <= 0 {
		t.Fatalf("Read: %v, want a known limit", l)
	}
	for _, b := range l.Bounds {
		if b.Free < l.Bytes {
			t.Errorf("bound %v is below Bytes %d: Bytes is not the least", b, l.Bytes)
		}
	}
}

func TestResident(t *testing.T) {
	s := fakeSystem(t, map[string]string{"proc/self/status": "VmPeak:\t 9 kB\nVmHWM:\t 2048 kB\nVmRSS:\t 1024 kB\n"}, nil)
	if now, peak, ok := s.Resident(); !ok || now != 1<<20 || peak != 2<<20 {
		t.Errorf("Resident: %d, %d, %v", now, peak, ok)
	}
	if _, _, ok := fakeSystem(t, nil, nil).Resident(); ok {
		t.Error("Resident with no /proc: ok")
	}
	if _, err := os.Stat("/proc/self/status"); err == nil {
		if now, peak, ok := Resident(); !ok || now <= 0 || peak < now {
			t.Errorf("Resident here: %d, %d, %v", now, peak, ok)
		}
	}
}

func TestMemoryCgroup(t *testing.T) {
	v1 := fakeSystem(t, map[string]string{
		"proc/self/mountinfo": "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
		"proc/self/cgroup":    "4:memory:/job/7\n0::/\n",
		"sys/fs/cgroup/memory/job/7/memory.limit_in_bytes": "max",
	}, nil)
	if dir, v2, ok := v1.MemoryCgroup(); !ok || v2 || dir != "/sys/fs/cgroup/memory/job/7" {
		t.Errorf("v1: %q, %v, %v", dir, v2, ok)
	}
	v2 := fakeSystem(t, map[string]string{
		"proc/self/mountinfo":                   "29 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"proc/self/cgroup":                      "0::/user.slice/a\n",
		"sys/fs/cgroup/user.slice/a/memory.max": "max",
	}, nil)
	if dir, isV2, ok := v2.MemoryCgroup(); !ok || !isV2 || dir != "/sys/fs/cgroup/user.slice/a" {
		t.Errorf("v2: %q, %v, %v", dir, isV2, ok)
	}
	if _, _, ok := fakeSystem(t, nil, nil).MemoryCgroup(); ok {
		t.Error("no /proc: ok")
	}
}
