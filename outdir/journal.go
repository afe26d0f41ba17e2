package outdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/infile"
)

// JournalName is the file in an output folder that lists what a command
// is writing there while it runs: a first line "# COMMAND", then each
// file (relative to the folder), listed and synced before it is written.
// The command removes it when it has finished, or when it stops and
// removes what it wrote; one that is still there (no process holding the
// folder's lock) is a write that was cut off, by SIGKILL or a second
// signal, and its files are at most those it lists.
const JournalName = ".unfinished"

// maxJournalBytes bounds a journal read back: a million names.
const maxJournalBytes = 256 << 20

// Journal is the list of files a command is writing into a folder.
type Journal struct {
	dir     string
	f       *os.File // nil once finished or closed
	claimed []string // what Claim listed, for Abort
}

// StartJournal starts dir's journal for command (e.g. "memunet
// predict"). The caller holds the folder's lock and has cleared what an
// earlier journal listed: a journal already there is refused.
func StartJournal(dir, command string) (*Journal, error) {
	path := filepath.Join(dir, JournalName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|noFollow, 0o644)
	if err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, f: f}
	if err := j.append("# " + command); err != nil {
		j.Close()
		os.Remove(path)
		return nil, err
	}
	// Its name durable too: a folder whose writes land in subfolders (data
	// synth's images/ and masks/) may never sync this one.
	if err := SyncDir(dir); err != nil {
		j.Close()
		os.Remove(path)
		return nil, err
	}
	return j, nil
}

// Dir is the folder the journal is in.
func (j *Journal) Dir() string { return j.dir }

// Claim lists names (relative to the folder; "" skipped) before they are
// written: one write, synced, so that a process killed at any point after
// leaves none of its files unlisted.
func (j *Journal) Claim(names ...string) error {
	var lines []string
	for _, n := range names {
		if n == "" {
			continue
		}
		if !filepath.IsLocal(n) || strings.ContainsAny(n, "\n\r") {
			return fmt.Errorf("%s: %q is not a file name inside the folder", filepath.Join(j.dir, JournalName), n)
		}
		lines = append(lines, filepath.ToSlash(filepath.Clean(n)))
	}
	if len(lines) == 0 {
		return nil
	}
	if err := j.append(strings.Join(lines, "\n")); err != nil {
		return err
	}
	j.claimed = append(j.claimed, lines...)
	return nil
}

func (j *Journal) append(lines string) error {
	if j.f == nil {
		return os.ErrClosed
	}
	if _, err := j.f.WriteString(lines + "\n"); err != nil {
		return fmt.Errorf("writing %s: %w", j.f.Name(), err)
	}
	return j.f.Sync()
}

// Finish removes the journal: everything it listed is written whole.
func (j *Journal) Finish() error {
	if j.f == nil {
		return os.ErrClosed
	}
	j.Close()
	if err := os.Remove(filepath.Join(j.dir, JournalName)); err != nil {
		return err
	}
	return SyncDir(j.dir)
}

// Abort undoes the write: it removes what Claim listed (what was not
// written yet is not missed), then the journal, as a cut-off write's next
// run would (Unfinished.Remove).
func (j *Journal) Abort() error {
	j.Close()
	return (&Unfinished{Files: j.claimed}).Remove(j.dir)
}

// Close lets the journal go and leaves its file, for the caller to
// remove with what it wrote (or, killed, for the next run).
func (j *Journal) Close() error {
	if j.f == nil {
		return nil
	}
	f := j.f
	j.f = nil
	return f.Close()
}

// Unfinished is a journal a command left: the write it lists was cut off.
type Unfinished struct {
	Command string   // as StartJournal was given it; "" where the file has no header
	Files   []string // relative to the folder, slash-separated; never outside it
}

// ReadJournal is the journal in dir; nil when dir holds none. Lines that
// do not name a file inside dir are skipped: removing what it lists never
// reaches outside the folder.
func ReadJournal(dir string) (*Unfinished, error) {
	path := filepath.Join(dir, JournalName)
	b, err := infile.ReadFile(path, maxJournalBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read (%v): remove it and what it lists, or write into another folder", path, err)
	}
	u := &Unfinished{}
	for i, line := range strings.Split(string(b), "\n") {
		if c, ok := strings.CutPrefix(line, "# "); ok && i == 0 {
			u.Command = c
		} else if line != "" && filepath.IsLocal(filepath.FromSlash(line)) {
			u.Files = append(u.Files, line)
		}
	}
	return u, nil
}

// Remove removes the files u lists from dir (those not there are not
// missed), then the journal: what a cut-off write left. A folder a file
// name passes through is never followed as a link, and a listed name
// where a device, a FIFO, a socket or a folder now is, is left: the
// write made only regular files, so that node is not its.
func (u *Unfinished) Remove(dir string) error {
	for _, name := range u.Files {
		local := filepath.FromSlash(name)
		for sub := filepath.Dir(local); sub != "."; sub = filepath.Dir(sub) {
			if err := NotALink(filepath.Join(dir, sub)); err != nil {
				return err
			}
		}
		path := filepath.Join(dir, local)
		if CheckTarget(path, File) != nil {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, JournalName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return SyncDir(dir)
}
