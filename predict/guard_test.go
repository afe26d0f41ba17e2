package predict

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"image"
	"image/jpeg"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// tree is every regular file under dir with a hash of its bytes, and
// every other entry with its kind.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[path] = string(sum[:])
		} else {
			out[path] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("%s: %d entries before, %d after", what, len(before), len(after))
	}
	for path, h := range before {
		if after[path] != h {
			t.Errorf("%s: %s changed", what, path)
		}
	}
}

// TestRunRefusesOutInsideInput: --out equal to --input, or inside it, is
// refused before anything is written, and the inputs stay byte-identical.
func TestRunRefusesOutInsideInput(t *testing.T) {
	in := t.TempDir()
	for _, name := range []string{"a.png", "b.png"} {
		writeImage(t, filepath.Join(in, name), 16, 16)
	}
	link := filepath.Join(t.TempDir(), "images")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	p := tinyPredictor(t, 2)
	for _, tc := range []struct{ input, out string }{
		{in, in},
		{in, filepath.Join(in, "masks")},
		{in, filepath.Join(link, "masks")},
		{link, in},
		{filepath.Join(in, "a.png"), filepath.Join(in, "a.png")},
	} {
		before := tree(t, in)
		_, err := p.Run(tc.input, tc.out, Options{Overlay: true}, Limits{}, nil)
		if err == nil || !strings.Contains(err.Error(), "write over the inputs") {
			t.Errorf("--input %s --out %s: %v", tc.input, tc.out, err)
		}
		sameTree(t, "--out "+tc.out, before, tree(t, in))
	}
}

// TestRunNamesCollidingInputs: a.png and a.jpg (one stem), and a.png's
// overlay and a_overlay.png's mask, would write one file; each input gets
// outputs of its own and the note names the renamed one.
func TestRunNamesCollidingInputs(t *testing.T) {
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 16, 16)
	writeImage(t, filepath.Join(in, "a_overlay.png"), 16, 16)
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, image.NewRGBA(image.Rect(0, 0, 16, 16)), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "a.jpg"), jb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var note bytes.Buffer
	rep, err := tinyPredictor(t, 4).Run(in, out, Options{Overlay: true, Probs: "npy"}, Limits{}, &note)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]string{}
	for _, o := range rep.Outputs {
		for _, f := range append([]string{o.Mask, o.Overlay}, o.Probs...) {
			if prev, ok := written[f]; ok {
				t.Errorf("%s is written for %s and %s", f, prev, o.Input)
			}
			written[f] = o.Input
			if _, err := os.Stat(filepath.Join(out, f)); err != nil {
				t.Error(err)
			}
		}
	}
	if len(rep.Outputs) != 3 || len(written) != 9 {
		t.Errorf("%d outputs, %d files: %v", len(rep.Outputs), len(written), written)
	}
	msg := note.String()
	for _, want := range []string{
		filepath.Join(in, "a.png") + " would write a.png, as " + filepath.Join(in, "a.jpg") + " does: its outputs are named a-png.png instead",
		filepath.Join(in, "a_overlay.png") + " would write a_overlay.png, as " + filepath.Join(in, "a.jpg") + " does",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("note lacks %q:\n%s", want, msg)
		}
	}
}

// TestRunDoesNotFollowPlantedLinks: links planted in an output folder are
// never written through. In a fresh folder a link makes the folder used,
// refused; in an earlier prediction's folder (its predict.json naming the
// links), --force replaces the links with files. Every link's target is
// unchanged, and every writer replaces a link at its path.
func TestRunDoesNotFollowPlantedLinks(t *testing.T) {
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 16, 16)
	elsewhere := t.TempDir()
	target := func(name string) string {
		path := filepath.Join(elsewhere, name)
		if _, err := os.Stat(path); err != nil {
			os.WriteFile(path, []byte("not predict's: "+name), 0o644)
		}
		return path
	}
	p := tinyPredictor(t, 1)

	fresh := t.TempDir()
	os.Symlink(target("a.png"), filepath.Join(fresh, "a.png"))
	before := tree(t, elsewhere)
	if _, err := p.Run(in, fresh, Options{}, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "no prediction") {
		t.Errorf("a folder holding a link: %v", err)
	}

	earlier := t.TempDir()
	prev, _ := json.Marshal(Report{Outputs: []Output{{Mask: "a.png", Overlay: "a_overlay.png", Probs: []string{"a_probs.npy"}}}})
	os.WriteFile(target(runfiles.PredictReport), prev, 0o644)
	for _, name := range []string{"a.png", "a_overlay.png", "a_probs.npy", runfiles.Legend, runfiles.PredictReport} {
		if err := os.Symlink(target(name), filepath.Join(earlier, name)); err != nil {
			t.Fatal(err)
		}
	}
	before = tree(t, elsewhere)
	if _, err := p.Run(in, earlier, Options{Overlay: true, Probs: "npy"}, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("an earlier prediction without --force: %v", err)
	}
	if _, err := p.Run(in, earlier, Options{Overlay: true, Probs: "npy", Force: true}, Limits{}, nil); err != nil {
		t.Fatal(err)
	}
	sameTree(t, "the links' targets", before, tree(t, elsewhere))
	for _, name := range []string{"a.png", "a_overlay.png", "a_probs.npy", runfiles.Legend, runfiles.PredictReport} {
		if st, err := os.Lstat(filepath.Join(earlier, name)); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v %v", name, st, err)
		}
	}

	// Each writer on its own, onto a link.
	dir := t.TempDir()
	writers := map[string]func(path string) error{
		"mask.png":  func(path string) error { return writeMask(path, make([]uint8, 4), 2, 2, nil) },
		"gray.png":  func(path string) error { return writeMask(path, make([]uint8, 4), 2, 2, []int{0, 255, 7}) },
		"probs.npy": func(path string) error { return writeNpy(path, make([]float32, 4), 1, 2, 2) },
		"any.png":   func(path string) error { return outdir.WritePNG(path, image.NewRGBA(image.Rect(0, 0, 2, 2))) },
	}
	before = tree(t, elsewhere)
	for name, write := range writers {
		os.Symlink(target(name), filepath.Join(dir, name))
		before = tree(t, elsewhere)
		if err := write(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Lstat(filepath.Join(dir, name)); !st.Mode().IsRegular() {
			t.Errorf("%s is still a link", name)
		}
	}
	sameTree(t, "the writers' link targets", before, tree(t, elsewhere))
}

// TestRunLocksOut: while another process holds --out (outdir.Acquire, as
// a second memunet predict would), predict is refused at once with the
// line naming it; once released, it predicts there.
func TestRunLocksOut(t *testing.T) {
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 16, 16)
	out := t.TempDir()
	held, err := outdir.Acquire(out, "memunet predict")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPredictor(t, 1)
	_, err = p.Run(in, out, Options{}, Limits{}, nil)
	var inUse *outdir.InUseError
	if !errors.As(err, &inUse) || !strings.Contains(err.Error(), out+" is in use by memunet predict (pid ") {
		t.Errorf("a held --out: %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("the refused predict wrote into %s: %v", out, entries)
	}
	held.Release()
	if _, err := p.Run(in, out, Options{}, Limits{}, nil); err != nil {
		t.Errorf("after release: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, outdir.LockName)); err == nil {
		t.Errorf("%s stays in %s", outdir.LockName, out)
	}
	// A refused predict leaves no folder it made.
	fresh := filepath.Join(t.TempDir(), "new")
	if _, err := p.Run(in, fresh, Options{Resize: "3x3"}, Limits{}, nil); err == nil {
		t.Fatal("--resize 3x3 accepted")
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Errorf("the refused predict left %s", fresh)
	}
	// One that fails midway (a.png predicted, big.png too large even by
	// tiles: its picture alone takes 16 MiB) removes what it wrote.
	writeImage(t, filepath.Join(in, "big.png"), 2048, 2048)
	_, need, err := p.fileBatch([]sizedFile{{path: filepath.Join(in, "a.png"), h: 16, w: 16, th: 16, tw: 16, decode: 16 * 16 * 4, picture: 16 * 16 * 4}}, 0, sizing{}, Options{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var note bytes.Buffer
	// a.png fits the automatic share, 3/4, with half a MiB to spare.
	if _, err := p.Run(in, fresh, Options{}, Limits{Available: (need.Total() + 1<<19) / 3 * 4}, &note); err == nil || !strings.Contains(err.Error(), "big.png") {
		t.Fatalf("big.png beyond the host's memory: %v", err)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Errorf("the failed predict left %s", fresh)
	}
}

// TestRunRefusesIrregularInputs: a FIFO (which would block the read) and
// a link to /dev/zero (which never ends) among the inputs are refused by
// name, before anything is read from them or written.
func TestRunRefusesIrregularInputs(t *testing.T) {
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 16, 16)
	fifo := filepath.Join(in, "b.png")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	zeros := filepath.Join(t.TempDir(), "zeros")
	os.MkdirAll(zeros, 0o755)
	writeImage(t, filepath.Join(zeros, "a.png"), 16, 16)
	if err := os.Symlink("/dev/zero", filepath.Join(zeros, "z.png")); err != nil {
		t.Fatal(err)
	}
	p := tinyPredictor(t, 1)
	for _, tc := range []struct{ input, want string }{
		{in, fifo + ": not a regular file (a named pipe (FIFO))"},
		{fifo, fifo + ": not a regular file (a named pipe (FIFO))"},
		{zeros, filepath.Join(zeros, "z.png") + ": not a regular file (a device)"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := p.Run(tc.input, out, Options{}, Limits{}, nil); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--input %s: %v", tc.input, err)
			}
			t.Logf("--input %s refused in %v", tc.input, time.Since(start))
		case <-time.After(time.Minute):
			t.Fatalf("--input %s: still reading after a minute", tc.input)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--input %s: %s was made", tc.input, out)
		}
	}
}

// TestRunAfterACutOffPrediction: a folder a killed predict left (its
// journal naming what it had begun to write, no predict.json) is refused
// without --force, saying it was cut off; with --force its files go and
// the new prediction is all the folder holds. A file the journal does not
// name stops --force and stays; a journal of another command is no
// prediction.
func TestRunAfterACutOffPrediction(t *testing.T) {
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 16, 16)
	writeImage(t, filepath.Join(in, "b.png"), 16, 16)
	p := tinyPredictor(t, 1)
	killed := func(t *testing.T, command string, names ...string) string {
		dir := t.TempDir()
		j, err := outdir.StartJournal(dir, command)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Claim("a.png", "a_overlay.png", "old.png"); err != nil {
			t.Fatal(err)
		}
		j.Close() // killed: the journal stays
		for _, name := range names {
			os.WriteFile(filepath.Join(dir, name), []byte("half a prediction"), 0o644)
		}
		return dir
	}
	opts := Options{Overlay: true}

	dir := killed(t, journalCommand, "a.png", "old.png", ".a_overlay.png.tmp-1")
	if _, err := p.Run(in, dir, opts, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "holds a prediction that was cut off (its predict was killed; 2 files, listed in "+filepath.Join(dir, outdir.JournalName)+")") ||
		!strings.Contains(err.Error(), "--force") {
		t.Errorf("a cut-off prediction without --force: %v", err)
	}
	opts.Force = true
	rep, err := p.Run(in, dir, opts, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.png", "a_overlay.png", "b.png", "b_overlay.png", runfiles.Legend, runfiles.PredictReport}
	var got []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) || len(rep.Outputs) != 2 {
		t.Errorf("after --force %s holds %v (%d outputs), want %v", dir, got, len(rep.Outputs), want)
	}
	for _, name := range want {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) == "half a prediction" {
			t.Errorf("%s is the killed predict's", name)
		}
	}

	dir = killed(t, journalCommand, "a.png", "mine.txt")
	if _, err := p.Run(in, dir, opts, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "also holds 1 others (e.g. mine.txt)") {
		t.Errorf("a cut-off prediction beside another file, --force: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mine.txt")); err != nil {
		t.Errorf("mine.txt: %v", err)
	}

	dir = killed(t, "memunet data synth", "a.png")
	if _, err := p.Run(in, dir, opts, Limits{}, nil); err == nil || !strings.Contains(err.Error(), "no prediction") {
		t.Errorf("another command's journal, --force: %v", err)
	}
}

// TestRefusedFolderKeepsItsTemps: a temporary file a killed write left
// (.NAME.tmp-*) is removed only from a folder predict takes; one it
// refuses keeps everything, a user's file named like one included.
func TestRefusedFolderKeepsItsTemps(t *testing.T) {
	refused, taken := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(refused, "notes.txt"), filepath.Join(refused, ".draft.tmp-1"), filepath.Join(taken, ".00000.png.tmp-7")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := (&Predictor{}).clearFolder(refused, true); err == nil || !strings.Contains(err.Error(), "no prediction") {
		t.Errorf("a folder with a foreign file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(refused, ".draft.tmp-1")); err != nil {
		t.Errorf("the refused folder lost its .draft.tmp-1: %v", err)
	}
	if err := (&Predictor{}).clearFolder(taken, false); err != nil {
		t.Errorf("a folder holding only a leftover temporary file: %v", err)
	}
	if entries, _ := os.ReadDir(taken); len(entries) != 0 {
		t.Errorf("the taken folder still holds %d entries", len(entries))
	}
}
