package rundir

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestProgressBarFitsTheTerminal: the bar's line fits 80 and 50 columns
// (no wrap, so no repeated lines), shows step/total, loss, the val mIoU once
// known, the pool peak (where there is room) and the ETA, and validations
// are lines of their own in bar mode too.
func TestProgressBarFitsTheTerminal(t *testing.T) {
	for _, cols := range []int{80, 50} {
		cfg := resumeConfig("fp32")
		cfg.Train.Steps, cfg.Train.ValEvery = 6, 2
		cfg.Output.Progress = "bar"
		var out bytes.Buffer
		mustRun(t, context.Background(), cfg, Options{OutDir: t.TempDir(), Progress: &out, Columns: cols, barRefresh: time.Nanosecond}, nil)
		text := out.String()
		ansi := regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
		var bars []string
		for _, seg := range strings.FieldsFunc(ansi.ReplaceAllString(text, ""), func(r rune) bool { return r == '\r' || r == '\n' }) {
			if !strings.Contains(seg, "|") {
				continue // a line of its own, which may wrap harmlessly
			}
			bars = append(bars, seg)
			if n := utf8.RuneCountInString(strings.TrimRight(seg, " ")); n > cols-1 {
				t.Errorf("%d columns: a bar line of %d: %q", cols, n, seg)
			}
		}
		if len(bars) == 0 {
			t.Fatalf("%d columns: no bar drawn: %q", cols, text)
		}
		last := bars[len(bars)-1]
		for _, want := range []string{"loss ", "/6)", "["} {
			if !strings.Contains(last, want) {
				t.Errorf("%d columns: the bar %q lacks %q", cols, last, want)
			}
		}
		if cols == 80 && (!strings.Contains(last, "miou ") || !strings.Contains(last, "peak ")) {
			t.Errorf("80 columns: the bar %q lacks the val mIoU or the pool peak", last)
		}
		if strings.Count(text, "val  step ") != 3 {
			t.Errorf("%d columns: %d validation lines, want 3 (steps 2, 4 and the end)", cols, strings.Count(text, "val  step "))
		}
	}
}

// TestBarWriter: predict and eval draw a bar where training would: on a
// terminal with output.progress auto, anywhere with bar; never with plain
// or none, nor with auto where the output is not a terminal (a file, a
// pipe).
func TestBarWriter(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	var buf bytes.Buffer
	for mode, want := range map[string]bool{"auto": false, "bar": true, "plain": false, "none": false} {
		if got := BarWriter(&buf, mode) != nil; got != want {
			t.Errorf("BarWriter(a buffer, %s): a bar %v, want %v", mode, got, want)
		}
	}
	if BarWriter(nil, "bar") != nil {
		t.Error("BarWriter(nil, bar) is not nil")
	}
}
