package outdir

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestJournalCutOff: a journal closed without Finish (a killed command)
// reads back with its command and every file claimed, in order; Remove
// takes those files and the journal, and nothing else.
func TestJournalCutOff(t *testing.T) {
	dir := t.TempDir()
	j, err := StartJournal(dir, "memunet data synth")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartJournal(dir, "memunet data synth"); err == nil {
		t.Error("a second journal in one folder was started")
	}
	if err := os.Mkdir(filepath.Join(dir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	claimed := []string{"images/00000.png", "masks/00000.png", "images/00001.png"}
	if err := j.Claim(claimed[0], "", claimed[1]); err != nil {
		t.Fatal(err)
	}
	if err := j.Claim(claimed[2]); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../x.png", "/etc/passwd", "a\nb.png"} {
		if err := j.Claim(bad); err == nil {
			t.Errorf("Claim(%q) passed", bad)
		}
	}
	for _, name := range []string{"images/00000.png", "images/mine.png"} { // 00001 never written
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	u, err := ReadJournal(dir)
	if err != nil || u == nil {
		t.Fatalf("ReadJournal: %v, %v", u, err)
	}
	if u.Command != "memunet data synth" || !slices.Equal(u.Files, claimed) {
		t.Errorf("read back %q %v, want %v", u.Command, u.Files, claimed)
	}
	if err := u.Remove(dir); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(left) != 1 || filepath.Base(left[0]) != "mine.png" {
		t.Errorf("after Remove %s holds %v, want images/mine.png", dir, left)
	}
	if u, err := ReadJournal(dir); u != nil || err != nil {
		t.Errorf("the journal is still there: %v, %v", u, err)
	}
}

// TestJournalFinished: Finish removes the journal; a folder without one
// reads back nil.
func TestJournalFinished(t *testing.T) {
	dir := t.TempDir()
	j, err := StartJournal(dir, "memunet predict")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Claim("a.png"); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := j.Claim("b.png"); err == nil {
		t.Error("a finished journal took a claim")
	}
	if u, err := ReadJournal(dir); u != nil || err != nil {
		t.Errorf("after Finish: %v, %v", u, err)
	}
}

// TestJournalNeverLeavesTheFolder: a planted journal naming files outside
// the folder, or through a linked subfolder, removes nothing there.
func TestJournalNeverLeavesTheFolder(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "keep.png")
	if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "images")); err != nil {
		t.Fatal(err)
	}
	lines := []string{"# memunet data synth", "../" + filepath.Base(outside) + "/keep.png", victim}
	if err := os.WriteFile(filepath.Join(dir, JournalName), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := ReadJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Files) != 0 {
		t.Errorf("files outside the folder read back: %v", u.Files)
	}
	u.Files = []string{"images/keep.png"}
	if err := u.Remove(dir); err == nil || !strings.Contains(err.Error(), "is a link") {
		t.Errorf("Remove through a linked folder: %v", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("%s is gone: %v", victim, err)
	}
}

// TestJournalAbort: a write that stops undoes itself: what it claimed and
// wrote is removed (what it claimed but never wrote is not missed), then
// the journal; a file it did not claim stays.
func TestJournalAbort(t *testing.T) {
	dir := t.TempDir()
	j, err := StartJournal(dir, "memunet test")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Claim("a.png", "b.png"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.png", "mine.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Abort(); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{"mine.txt"}) {
		t.Errorf("after Abort the folder holds %v, want only mine.txt", left)
	}
}
