package predict

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOddInputNameSkipped: a folder holding "a\nb.png" (a legal Linux
// name) and a plain image predicts the plain one, warns of the other by
// its quoted name and lists it in the report as skipped; the output
// folder holds nothing of it. A folder of only such names is an error
// naming one, and writes nothing.
func TestOddInputNameSkipped(t *testing.T) {
	in := t.TempDir()
	odd := filepath.Join(in, "a\nb.png")
	writeImage(t, odd, 16, 16)
	writeImage(t, filepath.Join(in, "ok.png"), 16, 16)
	p := tinyPredictor(t, 2)
	var warn, note bytes.Buffer
	p.Warn = &warn
	out := filepath.Join(t.TempDir(), "out")
	rep, err := p.Run(in, out, Options{Overlay: true}, Limits{}, &note)
	if err != nil {
		t.Fatalf("one odd name stopped the run: %v", err)
	}
	if rep.Images != 1 || len(rep.Outputs) != 1 || rep.Outputs[0].Mask != "ok.png" {
		t.Errorf("predicted %d images, outputs %+v; want ok.png's alone", rep.Images, rep.Outputs)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Input != odd || !strings.Contains(rep.Skipped[0].Why, "line break") {
		t.Errorf("skipped %+v, want %q for its line break", rep.Skipped, odd)
	}
	if want := `memunet: predict: warning: skipped "` + in + `/a\nb.png": its name holds a line break`; !strings.HasPrefix(warn.String(), want) ||
		strings.Count(warn.String(), "\n") != 1 {
		t.Errorf("warned %q, want one line starting %q", warn.String(), want)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := []string{"legend.png", "ok.png", "ok_overlay.png", "predict.json"}; !slices.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", out, got, want)
	}

	if err := os.Remove(filepath.Join(in, "ok.png")); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "none")
	_, err = p.Run(in, empty, Options{}, Limits{}, &note)
	if err == nil || !strings.Contains(err.Error(), `nothing to predict`) || !strings.Contains(err.Error(), `"`+in+`/a\nb.png"`) {
		t.Errorf("every input skipped: %v; want an error naming the skipped file", err)
	}
	if _, serr := os.Stat(empty); !os.IsNotExist(serr) {
		t.Errorf("%s exists (%v) after a run with nothing to predict", empty, serr)
	}
}

// TestNameProblems: the names predict cannot list or report faithfully,
// and outputs too long to make; a dataset sample of such a name is not
// skipped (its metrics count) but named by its index, with a note.
func TestNameProblems(t *testing.T) {
	for name, want := range map[string]string{
		"a.png":                           "",
		"naïve, spaced (1).png":           "",
		"a\nb.png":                        "line break",
		"a\rb.png":                        "line break",
		"a\x1b[31mred.png":                "control character",
		"a\xffb.png":                      "UTF-8",
		strings.Repeat("x", 256):          "longer than 255 bytes",
		strings.Repeat("é", 100):          "",
		"tab\there.png":                   "control character",
		"\u0085next-line.png":             "control character",
		strings.Repeat("y", 255):          "",
		strings.Repeat("y", 250) + ".png": "",
	} {
		if got := nameProblem(name); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("nameProblem(%q) = %q, want %q", name, got, want)
		}
	}

	n := newNamer(Options{Overlay: true}, 2)
	long := strings.Repeat("z", 245) // 245 + "_overlay.png" is 257 bytes
	if stem, why := n.fileName("/in/"+long+".png", long, "png"); stem != "" || !strings.Contains(why, "_overlay.png) would be 257 bytes long") {
		t.Errorf("a %d-byte stem with --overlay: %q, %q", len(long), stem, why)
	}
	if holder, _ := n.holder(long); holder != "" {
		t.Errorf("the skipped file holds its names (%q)", holder)
	}
	if got := n.name("dataset:val[3]", "a\nb", "val-00003"); got != "val-00003" || len(n.notes) != 1 || !strings.Contains(n.notes[0], `"a\nb"`) {
		t.Errorf("a sample named a\\nb: stem %q, notes %q", got, n.notes)
	}
}
