package data

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/outdir"
)

// TestWriteFolderAfterACutOffSet: a set a killed WriteFolder left (its
// journal listing what it had begun, a temporary file beside) is refused
// without Force, naming the command to paste; with Force exactly the
// listed files go and the new set is all images/ and masks/ hold. A file
// the journal does not list stops Force before anything is removed; a
// journal of another command is refused.
func TestWriteFolderAfterACutOffSet(t *testing.T) {
	syn := mustSynthetic(t, SyntheticConfig{Count: 3, Size: 16})
	killed := func(t *testing.T, command string, extra ...string) string {
		dir := t.TempDir()
		j, err := outdir.StartJournal(dir, command)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Claim("images/00000.png", "masks/00000.png", "images/00001.png", "masks/00001.png"); err != nil {
			t.Fatal(err)
		}
		j.Close() // killed: the journal stays
		for _, name := range append([]string{"images/00000.png", "masks/00000.png", "images/00001.png", "masks/.00001.png.tmp-7"}, extra...) {
			path := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte("half a set"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	replace := "memunet data synth --out DIR --force"
	dir := killed(t, journalCommand)
	err := WriteFolderUntil(context.Background(), syn, dir, FolderOptions{Replace: replace})
	if err == nil || !strings.Contains(err.Error(), dir+" holds a set cut off while it was written (its process was killed; 4 files, listed in "+filepath.Join(dir, outdir.JournalName)+"): replace it with "+replace) {
		t.Errorf("a cut-off set without Force: %v", err)
	}
	if err := WriteFolderUntil(context.Background(), syn, dir, FolderOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{"00000.png", "00001.png", "00002.png"}
	for _, sub := range []string{"images", "masks"} {
		var got []string
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range entries {
			got = append(got, e.Name())
			if b, _ := os.ReadFile(filepath.Join(dir, sub, e.Name())); string(b) == "half a set" {
				t.Errorf("%s/%s is the killed write's", sub, e.Name())
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s/ holds %v, want %v", sub, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, outdir.JournalName)); !os.IsNotExist(err) {
		t.Errorf("the journal is still there: %v", err)
	}

	dir = killed(t, journalCommand, "images/mine.png")
	if err := WriteFolderUntil(context.Background(), syn, dir, FolderOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "already holds 1 files") {
		t.Errorf("a cut-off set beside another file, Force: %v", err)
	}
	for _, name := range []string{"images/mine.png", "images/00000.png", outdir.JournalName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("a refused Force removed %s: %v", name, err)
		}
	}

	dir = killed(t, "memunet predict")
	if err := WriteFolderUntil(context.Background(), syn, dir, FolderOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "another command (memunet predict)") {
		t.Errorf("another command's journal, Force: %v", err)
	}
}

// TestRefusedSetFolderKeepsItsTemps: clearTemps removes a killed writer's
// temporary files only from a folder it takes, never from one it refuses.
func TestRefusedSetFolderKeepsItsTemps(t *testing.T) {
	d := t.TempDir()
	for _, f := range []string{"mine.png", ".draft.tmp-1"} {
		if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := clearTemps(d, nil); err == nil || !strings.Contains(err.Error(), "already holds 1 files") {
		t.Errorf("a folder with a foreign file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d, ".draft.tmp-1")); err != nil {
		t.Errorf("the refused folder lost its .draft.tmp-1: %v", err)
	}
	if err := os.Remove(filepath.Join(d, "mine.png")); err != nil {
		t.Fatal(err)
	}
	if err := clearTemps(d, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, ".draft.tmp-1")); !os.IsNotExist(err) {
		t.Errorf("a taken folder kept its leftover: %v", err)
	}
}
