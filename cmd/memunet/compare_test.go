package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/report"
)

// TestCompareRuns: compare --runs plots existing runs' validation curves
// together and tabulates their last and best val mIoU; a directory without
// metrics.jsonl is named in the error, and --runs with --config is a usage
// error.
func TestCompareRuns(t *testing.T) {
	a, _ := trainTiny(t)
	b, _ := trainTiny(t, "--set", "train.schedule.kind=cosine")
	out := t.TempDir()
	stdout := runOK(t, "compare", "--runs", a+","+b, "--out", out)
	for _, want := range []string{"last val miou", filepath.Base(a), filepath.Base(b), "val-curves.png"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	f, err := os.Open(filepath.Join(out, "val-curves.png"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(f); err != nil {
		t.Errorf("val-curves.png: %v", err)
	}
	f.Close()
	var o, e bytes.Buffer
	if code := run([]string{"compare", "--runs", a + "," + t.TempDir(), "--out", out}, &o, &e); code != 1 || !strings.Contains(e.String(), "has no metrics.jsonl") {
		t.Errorf("a directory without a run: exit %d, %q", code, e.String())
	}
	e.Reset()
	if code := run([]string{"compare", "--config", "../../configs/quickstart.yaml", "--runs", a}, &o, &e); code != 2 {
		t.Errorf("--runs with --config: exit %d, %q", code, e.String())
	}
}

// TestCompareLock: two compares started at the same moment on one --out:
// exactly one runs, the other is refused at once with the in-use line
// naming the first's pid and writes nothing; the folder then holds the
// winner's files, and its files line names the folder.
func TestCompareLock(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"compare", "--config", "../../configs/quickstart.yaml", "--steps", "2", "--out", dir,
		"--variants", "baseline,gorgonia"}, tinyArgs...)
	type result struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
		err            error
	}
	var procs [2]*result
	for i := range procs {
		r := &result{cmd: exec.Command(os.Args[0], args...)}
		r.cmd.Env = append(os.Environ(), "MEMUNET_TEST_AS_MAIN=1")
		r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
		procs[i] = r
	}
	for _, r := range procs {
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range procs {
		r.err = r.cmd.Wait()
	}
	won, lost := procs[0], procs[1]
	if won.err != nil {
		won, lost = lost, won
	}
	if won.err != nil || lost.err == nil {
		t.Fatalf("exits %v and %v, want one success and one refusal:\n%s\n%s", procs[0].err, procs[1].err, procs[0].stderr.String(), procs[1].stderr.String())
	}
	want := fmt.Sprintf("%s is in use by memunet compare (pid %d on ", dir, won.cmd.Process.Pid)
	if msg := lost.stderr.String(); !strings.Contains(msg, want) || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
		t.Errorf("refused compare said %q, want one line with %q", msg, want)
	}
	if lost.stdout.Len() != 0 {
		t.Errorf("refused compare printed %q", lost.stdout.String())
	}
	var rows []report.CompareRow
	raw, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err == nil {
		err = json.Unmarshal(raw, &rows)
	}
	if err != nil || len(rows) != 2 || rows[0].Error != "" || rows[1].Error != "" {
		t.Errorf("compare.json after the race: %v, rows %+v", err, rows)
	}
	if !strings.Contains(won.stdout.String(), "files: "+filepath.Join(dir, "compare.csv")) {
		t.Errorf("files line does not name the folder:\n%s", won.stdout.String())
	}
}

// TestCompareRefusesAUsedOut: an --out holding an earlier compare is
// refused, with the same compare plus --force as a command to paste
// (which then runs), and one into a fresh folder.
func TestCompareRefusesAUsedOut(t *testing.T) {
	t.Setenv("MEMUNET_TEST_AS_MAIN", "1")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compare.json"), []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"compare", "--config", "../../configs/quickstart.yaml", "--steps", "1", "--out", dir, "--variants", "baseline"}, tinyArgs...)
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	const prog = "go run ./cmd/memunet " // what a test binary reads as
	msg := strings.TrimSpace(stderr.String())
	_, rest, ok := strings.Cut(msg, "already holds a compare (compare.json), whose variant runs a new compare would replace: replace it with "+prog)
	force, fresh, ok2 := strings.Cut(rest, ", or compare into a new folder with "+prog)
	if !ok || !ok2 || strings.Contains(fresh, "--out") || !strings.Contains(fresh, "--variants baseline") || !strings.HasSuffix(force, "--out "+dir+" --force") {
		t.Fatalf("no pasteable commands in %q", msg)
	}
	stdout.Reset()
	if code := run(strings.Fields(force), &stdout, &stderr); code != 0 {
		t.Fatalf("the suggested %q: exit %d: %s", force, code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "baseline") || !strings.Contains(stdout.String(), "1 steps per variant") {
		t.Errorf("the suggested compare:\n%s", stdout.String())
	}
}
