package data

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"

	"github.com/memunet/memunet/outdir"
)

// WriteFolder writes every sample of src in the folder layout that
// data.source: folder reads: DIR/images/NNNNN.png (RGB) and
// DIR/masks/NNNNN.png (a palette PNG whose indices are the classes, see
// MaskPalette). It refuses a directory that already holds images/ or
// masks/ files, so nothing is overwritten (a temporary file a killed
// writer left, outdir.IsTemp, is removed instead); each file is written
// whole or not at all, never through a link (outdir.WriteFile), and is
// listed in the folder's outdir.Journal before it is written. It writes
// the whole set or none: on an error it removes what it wrote and the
// folders it made; killed, it leaves its journal naming what it wrote (a
// set cut off, see FolderOptions). The caller holds the folder's lock.
func WriteFolder(src ImageSource, dir string) error {
	return WriteFolderUntil(context.Background(), src, dir, FolderOptions{})
}

// FolderOptions say what WriteFolderUntil does with a set an earlier
// writer left cut off in the folder (its process killed: DIR/.unfinished
// lists what it wrote).
type FolderOptions struct {
	// Force removes that set, exactly the files listed, before writing;
	// without it the folder is refused.
	Force bool
	// Replace is the command to paste that does so (memunet data synth
	// with the same flags and --force), told in the refusal.
	Replace string
}

// journalCommand heads WriteFolder's journal: another command's journal
// is never taken for a cut-off set.
const journalCommand = "memunet data synth"

// WriteFolderUntil is WriteFolder stopped once ctx is done: it checks
// between samples, removes what it wrote and returns context.Cause(ctx).
func WriteFolderUntil(ctx context.Context, src ImageSource, dir string, opts FolderOptions) error {
	imgDir, maskDir := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	cutOff, err := cutOffSet(dir, opts)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	if cutOff != nil {
		for _, f := range cutOff.Files {
			listed[filepath.Join(dir, filepath.FromSlash(f))] = true
		}
	}
	var made []string
	var journal *outdir.Journal
	err = func() error {
		for _, d := range []string{imgDir, maskDir} {
			if err := clearTemps(d, listed); err != nil {
				return err
			}
			if _, err := os.Lstat(d); os.IsNotExist(err) {
				made = append(made, d)
			}
			if err := outdir.Subfolder(d); err != nil {
				if _, serr := os.Stat(d); isLoop(serr) {
					return fmt.Errorf("%s: %s", d, loopMsg(d))
				}
				return err
			}
		}
		if cutOff != nil {
			if err := cutOff.Remove(dir); err != nil {
				return err
			}
		}
		var err error
		if journal, err = outdir.StartJournal(dir, journalCommand); err != nil {
			return err
		}
		digits := len(fmt.Sprint(max(src.Len()-1, 0)))
		digits = max(digits, 5)
		pal := MaskPalette()
		var buf bytes.Buffer
		for i := range src.Len() {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			img, mask, err := src.Image(i)
			if err != nil {
				return err
			}
			name := fmt.Sprintf("%0*d.png", digits, i)
			if err := journal.Claim("images/"+name, "masks/"+name); err != nil {
				return err
			}
			buf.Reset()
			if err := png.Encode(&buf, img); err != nil {
				return fmt.Errorf("encoding image %d: %w", i, err)
			}
			if err := outdir.WriteBytes(filepath.Join(imgDir, name), buf.Bytes()); err != nil {
				return err
			}
			pm := image.NewPaletted(mask.Bounds(), pal)
			copy(pm.Pix, mask.Pix)
			buf.Reset()
			if err := png.Encode(&buf, pm); err != nil {
				return fmt.Errorf("encoding mask %d: %w", i, err)
			}
			if err := outdir.WriteBytes(filepath.Join(maskDir, name), buf.Bytes()); err != nil {
				return err
			}
		}
		return journal.Finish()
	}()
	if err != nil {
		if journal != nil {
			journal.Abort() // what it claimed, the journal last
		}
		for _, d := range made {
			os.Remove(d) // only if empty: never another's file
		}
	}
	return err
}

// cutOffSet is the set an earlier WriteFolder into dir left when it was
// killed, nil if none; it is refused (an error) unless opts.Force, and a
// journal of another command always is.
func cutOffSet(dir string, opts FolderOptions) (*outdir.Unfinished, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, nil // absent (made next), or refused with the reason as images/ is made
	}
	u, err := outdir.ReadJournal(dir)
	if err != nil || u == nil {
		return nil, err
	}
	journal := filepath.Join(dir, outdir.JournalName)
	switch {
	case u.Command != journalCommand:
		return nil, fmt.Errorf("%s holds files another command (%s) was writing when it was cut off, listed in %s: write into another directory", dir, u.Command, journal)
	case !opts.Force && opts.Replace == "":
		return nil, fmt.Errorf("%s holds a set cut off while it was written (its process was killed; %d files, listed in %s): write into another directory, or replace it with --force", dir, len(u.Files), journal)
	case !opts.Force:
		return nil, fmt.Errorf("%s holds a set cut off while it was written (its process was killed; %d files, listed in %s): replace it with %s, or write into another directory", dir, len(u.Files), journal, opts.Replace)
	}
	return u, nil
}

// clearTemps readies d for WriteFolder: it removes the temporary files a
// killed writer left in the real folder d and refuses d if it holds any
// other file but those listed (a cut-off set's, removed next); it never
// looks through a link.
func clearTemps(d string, listed map[string]bool) error {
	if st, err := os.Lstat(d); err != nil || !st.IsDir() {
		return nil // absent (made next), or a link Subfolder refuses with the reason
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		return err
	}
	n := 0
	var temps []string // removed only once d is taken: a refused one keeps everything
	for _, e := range entries {
		if outdir.IsTemp(e.Name()) && e.Type().IsRegular() {
			temps = append(temps, filepath.Join(d, e.Name()))
		} else if !listed[filepath.Join(d, e.Name())] {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("%s already holds %d files; write into a new or empty directory", d, n)
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil {
			return err
		}
	}
	return nil
}
