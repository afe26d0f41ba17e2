// Package memlimit says how much memory this process may still take from
// the host, as the kernel will enforce it: the smallest of the machine's
// MemAvailable, the free part of every memory cgroup the process is in
// (its own and each ancestor's limit less its usage, cgroup v2 or v1), and
// the free part of its address-space and data rlimits (RLIMIT_AS, as
// `ulimit -v` sets it, and RLIMIT_DATA).
//
// A container, a Slurm job or a Kubernetes pod limits memory by cgroup,
// not by what /proc/meminfo shows: a plan checked against MemAvailable
// alone passes there and the kernel's OOM killer ends the run with no
// message. Every host check of memunet (memory.capacity: auto, the fit
// checks of train, predict, eval, compare and plan, automatic tiles and
// patches) reads Read once and says its Source.
//
// Nothing is cached: each Read sees the limits as they are now. A System
// names where the files are, so tests read a fake /proc and /sys.
package memlimit
