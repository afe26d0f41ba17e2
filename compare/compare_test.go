package compare

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/report"
	"github.com/memunet/memunet/runfiles"
)

// fakeMemunet writes a script that acts as memunet for compare's children:
// whatever it is asked, it writes summaryJSON into its --out and exits 0.
func fakeMemunet(t *testing.T, summaryJSON string) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "memunet")
	script := `#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --out ]; then out=$2; fi
  shift
done
mkdir -p "$out" && echo '` + summaryJSON + `' > "$out/summary.json" && echo '{"step":1,"points":[]}' > "$out/timeline.json"
`
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func testOptions(t *testing.T, exe string) Options {
	cfg := config.Default()
	cfg.Data.Size = 16
	return Options{Exe: exe, ConfigPath: "q.yaml", Config: cfg, Variants: []string{"baseline", Gorgonia}, Steps: 3, Dir: t.TempDir()}
}

// TestChildStoppedEarly: a child whose summary shows fewer steps than
// asked (it was stopped, or the folder held an earlier run) is a failed
// row, not a row of partial figures.
func TestChildStoppedEarly(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	o := testOptions(t, fakeMemunet(t, `{"steps":1,"interrupted":true,"peak_allocated_bytes":1000,"step_ms_median":5}`))
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seen []string
	rows, _ := c.Run(func(r report.CompareRow) { seen = append(seen, r.Name) })
	if strings.Join(seen, ",") != "baseline,gorgonia" || len(rows) != 2 {
		t.Fatalf("rows %v, seen %v", rows, seen)
	}
	for _, r := range rows {
		if r.Error != "stopped after 1 of 3 steps" || r.PeakAllocatedBytes != 0 || r.StepMSMedian != 0 {
			t.Errorf("%s: error %q, peak %d, step %v ms; want a failed row without figures", r.Name, r.Error, r.PeakAllocatedBytes, r.StepMSMedian)
		}
	}
}

// TestOneCompareAtATime: while a compare holds its folder, another
// compare, or compare --runs, into it is refused naming the holder; after
// Close it is free again.
func TestOneCompareAtATime(t *testing.T) {
	o := testOptions(t, "memunet")
	first, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var inUse *outdir.InUseError
	if _, err := New(o); !errors.As(err, &inUse) || inUse.Holder.PID != os.Getpid() || inUse.Holder.Command != LockCommand {
		t.Errorf("second compare: %v, want in use by %s (pid %d)", err, LockCommand, os.Getpid())
	}
	run := t.TempDir()
	if err := os.WriteFile(filepath.Join(run, "metrics.jsonl"), []byte(`{"type":"val","step":1,"val_miou":0.5}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Runs([]string{run}, o.Dir); !errors.As(err, &inUse) {
		t.Errorf("compare --runs into a held folder: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := New(o)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	second.Close()
	r, err := Runs([]string{run, " "}, o.Dir)
	if err != nil || len(r.Names) != 1 || r.Path != filepath.Join(o.Dir, runfiles.ValCurves) {
		t.Errorf("Runs: %+v, %v", r, err)
	}
	if _, err := Runs([]string{""}, o.Dir); !errors.Is(err, ErrNoRuns) {
		t.Errorf("no runs: %v", err)
	}
	if _, err := New(Options{Exe: "memunet", Dir: o.Dir}); err == nil {
		t.Error("0 steps: no error")
	}
}

// TestUsedFolderRefused: a Dir that holds an earlier compare's file or a
// variant's run is refused unless Force; one holding other things is not.
func TestUsedFolderRefused(t *testing.T) {
	for _, tc := range []struct {
		plant string // a file to write, relative to Dir
		holds string // "": not used
	}{
		{"notes.txt", ""},
		{"compare.json", "compare.json"},
		{"compare.csv", "compare.csv"},
		{"baseline/config.yaml", "baseline/"},
		{"gorgonia/summary.json", "gorgonia/"},
	} {
		t.Run(tc.plant, func(t *testing.T) {
			o := testOptions(t, "memunet")
			path := filepath.Join(o.Dir, tc.plant)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := New(o)
			var used *UsedError
			switch {
			case tc.holds == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.holds == "":
				c.Close()
				return
			case !errors.As(err, &used) || used.Holds != tc.holds:
				t.Fatalf("New: %v, want a *UsedError holding %s", err, tc.holds)
			}
			o.Force = true
			if c, err = New(o); err != nil {
				t.Fatalf("with Force: %v", err)
			}
			c.Close()
		})
	}
}
