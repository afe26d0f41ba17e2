// Package childtest runs a test of the running test binary again in a
// child process, to measure what the parent cannot: the child's peak
// resident memory, fresh of what other tests allocated (a read that must
// stay bounded is held to a bound in bytes). On Linux a child's rusage
// counts its parent's peak too (exec records the peak of the address
// space it leaves, and os/exec starts the child in the parent's), so the
// child reports its own (ReportPeak, OwnPeakRSS). Only tests import it.
package childtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/memlimit"
)

// PeakRSS runs the test name in a child of the test binary with the
// environment variable key set to value (the child's test sees it and
// does the work), and returns the child's output and peak RSS in bytes.
// It fails t when the child does not pass or runs past limit (a read that
// blocked), and skips under -short or where the system keeps no rusage.
func PeakRSS(t testing.TB, name, key, value string, limit time.Duration) (string, int64) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), key+"="+value)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the child did not finish within %v: a read blocked or ran on\n%s", limit, out.String())
	}
	if err != nil || !strings.Contains(out.String(), "--- PASS: "+name) { // "PASS" alone: no test matched
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if _, after, ok := strings.Cut(line, peakTag); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(after), 10, 64); err == nil {
				return out.String(), n
			}
		}
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage on this system")
	}
	return out.String(), int64(ru.Maxrss) << 10 // kilobytes on Linux
}

// peakTag begins the line ReportPeak logs.
const peakTag = "childtest: own peak RSS bytes "

// ReportPeak logs this process's own peak resident memory for PeakRSS to
// read: a child's test defers it in the branch that does the work.
func ReportPeak(t testing.TB) {
	if n, ok := OwnPeakRSS(); ok {
		t.Logf("%s%d", peakTag, n)
	}
}

// OwnPeakRSS is this process's own peak resident memory in bytes (VmHWM of
// /proc/self/status: memlimit.Resident), and whether the system reports it.
func OwnPeakRSS() (int64, bool) {
	_, peak, ok := memlimit.Resident()
	return peak, ok
}
