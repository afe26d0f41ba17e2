package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/memory"
)

// Limit is what this process may still take from the host now.
type Limit struct {
	// Bytes is the least Free of Bounds: 0 where no bound could be read
	// (unknown; the checks then pass).
	Bytes int64
	// Bounds are every limit found, the binding one (least Free) first.
	Bounds []Bound
}

// Bound is one limit on this process's memory and what counts against it.
type Bound struct {
	// Kind is what sets it: KindMeminfo, KindCgroupV2, KindCgroupV1,
	// KindAddressSpace, KindData or KindGiven.
	Kind string
	// Where is the file or cgroup folder it was read from.
	Where string
	// Limit is the limit in bytes (MemTotal for KindMeminfo); Used what
	// counts against it now; Free what is left (MemAvailable for
	// KindMeminfo, which is not Limit-Used: caches are reclaimable).
	Limit, Used, Free int64
}

// A Bound's kinds, as the help and the reports name them.
const (
	KindMeminfo      = "MemAvailable"
	KindCgroupV2     = "cgroup memory.max"
	KindCgroupV1     = "cgroup memory.limit_in_bytes"
	KindAddressSpace = "RLIMIT_AS"
	KindData         = "RLIMIT_DATA"
	KindGiven        = "given"
)

// Given is a limit of n bytes that the caller sets (a test, a figure the
// user gave), named by where.
func Given(n int64, where string) Limit {
	return Limit{Bytes: n, Bounds: []Bound{{Kind: KindGiven, Where: where, Limit: n, Free: n}}}
}

func (b Bound) String() string {
	free, limit, used := memory.FormatBytes(b.Free), memory.FormatBytes(b.Limit), memory.FormatBytes(b.Used)
	switch b.Kind {
	case KindMeminfo:
		return fmt.Sprintf("%s of %s, %s of MemTotal %s", KindMeminfo, b.Where, free, limit)
	case KindCgroupV2, KindCgroupV1:
		return fmt.Sprintf("%s %s of %s, %s in use", b.Kind, limit, b.Where, used)
	case KindGiven:
		return fmt.Sprintf("%s %s", limit, b.Where)
	case KindAddressSpace:
		return fmt.Sprintf("%s (ulimit -v) %s, %s of address space mapped", b.Kind, limit, used)
	}
	return fmt.Sprintf("%s (ulimit -d) %s, %s of data mapped", b.Kind, limit, used)
}

// Source names the binding bound, as "cgroup memory.max 8.00 GiB of
// /sys/fs/cgroup/job, 1.20 GiB in use"; "unknown" where none was read.
func (l Limit) Source() string {
	if len(l.Bounds) == 0 {
		return "unknown: no limit could be read"
	}
	return l.Bounds[0].String()
}

// Short is the bytes and the binding bound without where it was read:
// "1.00 GiB (cgroup memory.max 8.00 GiB, 7.00 GiB in use)".
func (l Limit) Short() string {
	if l.Bytes <= 0 || len(l.Bounds) == 0 {
		return "unknown (no limit could be read)"
	}
	b := l.Bounds[0]
	why := b.Kind
	switch b.Kind {
	case KindMeminfo:
		why += " of /proc/meminfo"
	case KindGiven:
		why = b.Where
	default:
		why += fmt.Sprintf(" %s, %s in use", memory.FormatBytes(b.Limit), memory.FormatBytes(b.Used))
	}
	return fmt.Sprintf("%s (%s)", memory.FormatBytes(l.Bytes), why)
}

// String is the bytes and their source: "6.80 GiB (cgroup memory.max ...)".
func (l Limit) String() string {
	if l.Bytes <= 0 {
		return "unknown (no limit could be read)"
	}
	return fmt.Sprintf("%s (%s)", memory.FormatBytes(l.Bytes), l.Source())
}

// Margin is the share of Limit.Bytes an automatic choice (a tile, a patch,
// a batch) may plan to take: a quarter stays for what no plan counts (the
// Go runtime's own heap and collector slack, the page cache a read fills,
// other processes starting beside this one).
const (
	MarginNum = 3
	MarginDen = 4
)

// Budget is what an automatic choice may plan to take: Margin of Bytes,
// or 0 where Bytes is unknown.
func (l Limit) Budget() int64 { return l.Bytes / MarginDen * MarginNum }

// MarginText is Margin in the help's words.
const MarginText = "3/4 of the memory this process may use (the least of MemAvailable, its cgroups' free memory and its rlimits)"

// System is where Read finds the kernel's files, and the rlimits.
type System struct {
	// Root prefixes /proc and /sys ("" for the real ones).
	Root string
	// Rlimit is the soft limit of KindAddressSpace or KindData in bytes,
	// and false where it is unlimited or cannot be read.
	Rlimit func(kind string) (uint64, bool)
}

// Read is this process's limit now, from the real /proc, /sys and rlimits.
func Read() Limit { return System{Rlimit: rlimit}.Read() }

// Read is the process's limit as s shows it.
func (s System) Read() Limit {
	var l Limit
	if b, ok := s.meminfo(); ok {
		l.Bounds = append(l.Bounds, b)
	}
	l.Bounds = append(l.Bounds, s.cgroups()...)
	l.Bounds = append(l.Bounds, s.rlimits()...)
	slices.SortStableFunc(l.Bounds, func(a, b Bound) int {
		switch {
		case a.Free < b.Free:
			return -1
		case a.Free > b.Free:
			return 1
		}
		return 0
	})
	if len(l.Bounds) > 0 {
		l.Bytes = max(l.Bounds[0].Free, 1) // known, if nothing is left
	}
	return l
}

func (s System) file(name string) string { return filepath.Join(s.Root, filepath.FromSlash(name)) }

// meminfo is MemAvailable (Free) of MemTotal (Limit).
func (s System) meminfo() (Bound, bool) {
	name := s.file("/proc/meminfo")
	f := keyedKiB(name, "MemAvailable:", "MemTotal:")
	avail, ok1 := f["MemAvailable:"]
	total, ok2 := f["MemTotal:"]
	if !ok1 || !ok2 {
		return Bound{}, false
	}
	return Bound{Kind: KindMeminfo, Where: "/proc/meminfo", Limit: total, Used: total - avail, Free: avail}, true
}

// keyedKiB reads lines "Key: N kB" of a /proc file into bytes by key.
func keyedKiB(name string, keys ...string) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(name)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[2] == "kB" && slices.Contains(keys, f[0]) {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil && n >= 0 && n < 1<<53 {
				out[f[0]] = n << 10
			}
		}
	}
	return out
}

// rlimits are RLIMIT_AS against VmSize and RLIMIT_DATA against VmData
// (what the kernel counts against each), where they are set.
func (s System) rlimits() []Bound {
	if s.Rlimit == nil {
		return nil
	}
	status := s.file("/proc/self/status")
	mapped := keyedKiB(status, "VmSize:", "VmData:")
	var out []Bound
	for _, r := range []struct{ kind, field string }{{KindAddressSpace, "VmSize:"}, {KindData, "VmData:"}} {
		lim, ok := s.Rlimit(r.kind)
		if !ok || lim >= unlimited {
			continue
		}
		used := mapped[r.field]
		out = append(out, Bound{Kind: r.kind, Where: "/proc/self/status", Limit: int64(lim), Used: used, Free: max(int64(lim)-used, 0)})
	}
	return out
}

// unlimited is where a limit means none: cgroup v1 writes "no limit" as
// PAGE_COUNTER_MAX pages (9223372036854771712 bytes), an rlimit as ~0.
const unlimited = 1 << 62

// cgroups are the memory limits of every cgroup this process is in, its
// own and each ancestor's up to the hierarchy's mount, v2 and v1.
func (s System) cgroups() []Bound {
	var out []Bound
	for _, g := range s.memoryGroups() {
		out = append(out, s.cgroupChain(g.mount, g.path)...)
	}
	return out
}

// memoryGroup is a memory cgroup this process is in: its path in the
// hierarchy that mount shows.
type memoryGroup struct {
	mount cgroupMount
	path  string
}

// memoryGroups are the process's memory cgroups (/proc/self/cgroup's v2
// line and v1 lines with the memory controller), each with every mount
// of its hierarchy.
func (s System) memoryGroups() []memoryGroup {
	membership, err := os.ReadFile(s.file("/proc/self/cgroup"))
	if err != nil {
		return nil
	}
	mounts := s.cgroupMounts()
	var out []memoryGroup
	for _, line := range strings.Split(string(membership), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		v2 := parts[0] == "0" && parts[1] == ""
		if !v2 && !slices.Contains(strings.Split(parts[1], ","), "memory") {
			continue
		}
		for _, m := range mounts {
			if m.v2 == v2 {
				out = append(out, memoryGroup{m, parts[2]})
			}
		}
	}
	return out
}

// cgroupMount is a mount of a cgroup hierarchy: v2, or v1's memory one.
type cgroupMount struct {
	root, point string // the hierarchy's folder it shows, where it is mounted
	v2          bool
}

// cgroupMounts are the cgroup2 mounts and the cgroup v1 mounts with the
// memory controller, from /proc/self/mountinfo.
func (s System) cgroupMounts() []cgroupMount {
	b, err := os.ReadFile(s.file("/proc/self/mountinfo"))
	if err != nil {
		return nil
	}
	var out []cgroupMount
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root point options [optional...] - type source super
		f := strings.Fields(line)
		dash := slices.Index(f, "-")
		if dash < 6 || len(f) < dash+4 {
			continue
		}
		fstype, super := f[dash+1], f[dash+3]
		m := cgroupMount{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch {
		case fstype == "cgroup2":
			m.v2 = true
		case fstype == "cgroup" && slices.Contains(strings.Split(super, ","), "memory"):
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// relative is cgroup group's path below m's mount point.
func (m cgroupMount) relative(group string) string {
	rel := group
	if m.root != "/" {
		if r, ok := strings.CutPrefix(group, m.root); ok && (r == "" || r[0] == '/') {
			rel = r
		} else {
			rel = "/" // a namespaced view: the mount shows the group itself
		}
	}
	return path.Clean("/" + rel)
}

// cgroupChain is the limit of cgroup group (a path in m's hierarchy) and
// of each ancestor shown under m, the group's own first; levels without a
// limit are left out.
func (s System) cgroupChain(m cgroupMount, group string) []Bound {
	rel := m.relative(group)
	var out []Bound
	for {
		dir := path.Join(m.point, rel)
		if b, ok := s.cgroupLevel(dir, m.v2); ok {
			out = append(out, b)
		}
		if rel == "/" {
			return out
		}
		rel = path.Dir(rel)
	}
}

// cgroupLevel is one cgroup folder's limit: its limit less its usage, the
// inactive page cache not counted as used (the kernel reclaims it before
// it kills; the kubelet counts a pod's working set the same way).
func (s System) cgroupLevel(dir string, v2 bool) (Bound, bool) {
	limitFile, usageFile, inactiveKey, kind := "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file", KindCgroupV1
	if v2 {
		limitFile, usageFile, inactiveKey, kind = "memory.max", "memory.current", "inactive_file", KindCgroupV2
	}
	limit, ok := readBytes(s.file(path.Join(dir, limitFile)))
	if !ok || limit >= unlimited {
		return Bound{}, false
	}
	used, ok := readBytes(s.file(path.Join(dir, usageFile)))
	if !ok {
		return Bound{}, false
	}
	if st, err := os.ReadFile(s.file(path.Join(dir, "memory.stat"))); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, inactiveKey+" "); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
					used = max(used-n, 0)
				}
			}
		}
	}
	return Bound{Kind: kind, Where: dir, Limit: limit, Used: used, Free: max(limit-used, 0)}, true
}

// readBytes reads a cgroup file of one number ("max" is unlimited).
func readBytes(name string) (int64, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return unlimited, true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return int64(min(n, unlimited)), true
}

// Resident is this process's resident memory now and at its peak (VmRSS
// and VmHWM of /proc/self/status) in bytes; ok is false where the system
// does not report them. The peak is the process's own: unlike rusage's,
// it does not carry a parent's peak across exec.
func Resident() (now, peak int64, ok bool) { return System{}.Resident() }

// Resident is the process's resident memory as s shows it.
func (s System) Resident() (now, peak int64, ok bool) {
	f := keyedKiB(s.file("/proc/self/status"), "VmRSS:", "VmHWM:")
	now, ok1 := f["VmRSS:"]
	peak, ok2 := f["VmHWM:"]
	return now, peak, ok1 && ok2
}

// MemoryCgroup is the folder of this process's own memory cgroup (v2,
// else v1's memory hierarchy) and whether it is v2; ok is false where the
// process is in none that is mounted.
func MemoryCgroup() (dir string, v2, ok bool) { return System{}.MemoryCgroup() }

// MemoryCgroup is the process's memory cgroup as s shows it: the first
// whose memory files are there (a v2 hierarchy without the memory
// controller, as systemd's hybrid layout mounts it, is passed over).
func (s System) MemoryCgroup() (dir string, v2, ok bool) {
	for _, g := range s.memoryGroups() {
		probe := "memory.limit_in_bytes"
		if g.mount.v2 {
			probe = "memory.max"
		}
		d := path.Join(g.mount.point, g.mount.relative(g.path))
		if _, err := os.Stat(s.file(path.Join(d, probe))); err == nil {
			return d, g.mount.v2, true
		}
	}
	return "", false, false
}
