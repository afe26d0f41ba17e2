package bench

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
)

func TestChildArgs(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{[]string{"--config", "q.yaml", "--repeat", "3", "--steps", "2"}, []string{"bench", "--json", "--config", "q.yaml", "--steps", "2"}},
		{[]string{"-repeat=4", "--config", "q.yaml"}, []string{"bench", "--json", "--config", "q.yaml"}},
		{[]string{"--set", "data.path=repeat", "--repeat=2"}, []string{"bench", "--json", "--set", "data.path=repeat"}},
	} {
		if got := ChildArgs(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("ChildArgs(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestPeak(t *testing.T) {
	if m, lo, hi := (Result{PeakSamples: []float64{300, 100, 200}}).Peak(); m != 200 || lo != 100 || hi != 300 {
		t.Errorf("Peak: %g, %g, %g", m, lo, hi)
	}
	if m, _, _ := (Result{}).Peak(); m != 0 {
		t.Errorf("Peak of no samples: %g", m)
	}
}

// TestRun: every variant is a row, one that cannot be derived a row with
// its error; on the CPU the peak is sampled before each variant and after
// the last; the steps' spread brackets their median.
func TestRun(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth = 4, 2
	cfg.Data.Size, cfg.Data.Count, cfg.Train.BatchSize = 16, 24, 4
	var seen []string
	res, err := Run(Options{Config: cfg, Variants: []string{"config", " fp16", "bogus"}, Steps: 3, PeakSample: 1}, cpu.New(), func(r Row) { seen = append(seen, r.Name) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"config", "fp16", "bogus"}) || len(res.Rows) != 3 {
		t.Fatalf("rows %v, seen %v", res.Rows, seen)
	}
	if len(res.PeakSamples) != 4 || res.Kernel == "" || res.Cores < 1 || res.Device != "cpu" {
		t.Errorf("peak samples %v, kernel %q, cores %d, device %q", res.PeakSamples, res.Kernel, res.Cores, res.Device)
	}
	for _, r := range res.Rows[:2] {
		if r.Error != "" || !(r.StepMSMin <= r.StepMS && r.StepMS <= r.StepMSMax) || r.StepMSMin <= 0 {
			t.Errorf("%s: %+v", r.Name, r)
		}
	}
	if res.Rows[2].Error == "" {
		t.Errorf("bogus ran: %+v", res.Rows[2])
	}
	if _, err := Run(Options{Config: cfg, Variants: []string{"config"}}, cpu.New(), nil); err == nil {
		t.Error("0 steps accepted")
	}
}

// TestRepeat: each process's JSON is read in turn; a process that fails
// is an error naming it and saying its stderr.
func TestRepeat(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	var got []int
	res, err := Repeat(context.Background(), "/bin/sh", []string{"-c", `echo '{"device":"cpu","cores":2,"rows":[{"name":"config","step_ms":5}]}'`}, 3,
		func(i int, r Result) { got = append(got, i) })
	if err != nil || len(res) != 3 || !slices.Equal(got, []int{0, 1, 2}) || res[2].Rows[0].StepMS != 5 {
		t.Fatalf("Repeat: %v, %+v, %v", err, res, got)
	}
	_, err = Repeat(context.Background(), "/bin/sh", []string{"-c", "echo no such config >&2; exit 1"}, 2, nil)
	if err == nil || !strings.Contains(err.Error(), "process 1 of 2") || !strings.Contains(err.Error(), "no such config") {
		t.Errorf("a failing process: %v", err)
	}
}
