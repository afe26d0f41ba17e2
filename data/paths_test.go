package data

import (
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A VOC list id that leads outside the VOC root ("../x", an absolute path)
// is refused, naming the list, the line and the id; the file it points at
// is not read.
func TestVOCListIDOutsideRoot(t *testing.T) {
	for _, id := range []string{"../../outside", "2007_000001/../../../outside", "/etc/passwd", ".."} {
		t.Run(id, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "voc")
			vocLike(t, dir, [][2]int{{16, 16}, {16, 16}, {16, 16}}, nil)
			// What "../../outside" reaches from JPEGImages/ and SegmentationClass/.
			img, _ := os.ReadFile(filepath.Join(dir, "JPEGImages", "2007_000000.jpg"))
			mask, _ := os.ReadFile(filepath.Join(dir, "SegmentationClass", "2007_000000.png"))
			writeFile(t, filepath.Join(top, "outside.jpg"), img)
			writeFile(t, filepath.Join(top, "outside.png"), mask)
			list := filepath.Join(dir, vocTrainList)
			writeFile(t, list, []byte("2007_000000\n"+id+"\n2007_000001\n2007_000002\n"))
			cfg := SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
			_, err := Open(cfg)
			if err == nil || !strings.Contains(err.Error(), list+":2: id \""+id+"\"") || !strings.Contains(err.Error(), "outside the VOC root") {
				t.Fatalf("Open: %v", err)
			}
			rep, err := Check(cfg)
			if err != nil || len(rep.Fatal()) != 1 || rep.Samples != 3 {
				t.Errorf("Check: %v, %d samples, problems %v", err, rep.Samples, rep.Problems)
			}
		})
	}
	// Ids in subfolders of the root are fine.
	dir := t.TempDir()
	vocLike(t, dir, [][2]int{{16, 16}, {16, 16}}, nil)
	for _, sub := range []string{"JPEGImages", "SegmentationClass"} {
		ext := map[string]string{"JPEGImages": ".jpg", "SegmentationClass": ".png"}[sub]
		if err := os.MkdirAll(filepath.Join(dir, sub, "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, sub, "2007_000001"+ext), filepath.Join(dir, sub, "a", "2007_000001"+ext)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, vocTrainList), []byte("2007_000000\na/2007_000001\n"))
	mustOpen(t, SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.5}, Channels: 3, Classes: 3})
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
}

// A symlink loop in a dataset is reported as one, naming the path: never a
// generic error, a silently skipped file or a hang.
func TestSymlinkLoops(t *testing.T) {
	voc := func(t *testing.T, dir string) SourceConfig {
		vocLike(t, dir, [][2]int{{16, 16}, {16, 16}, {16, 16}}, nil)
		return SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
	}
	folder := func(t *testing.T, dir string) SourceConfig {
		grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
		return folderConfig(dir)
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir string) (SourceConfig, string)
	}{
		{"folder image links to itself", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := folder(t, dir)
			p := filepath.Join(dir, "images", "x.png")
			symlink(t, "x.png", p)
			writeFile(t, filepath.Join(dir, "masks", "x.png"), encodePNG(t, image.NewGray(image.Rect(0, 0, 16, 16))))
			return cfg, p
		}},
		{"folder image in a two-link cycle", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := folder(t, dir)
			os.Remove(filepath.Join(dir, "images", "01.png"))
			symlink(t, "01b.png", filepath.Join(dir, "images", "01.png"))
			symlink(t, "01.png", filepath.Join(dir, "images", "01b.png"))
			return cfg, filepath.Join(dir, "images", "01.png")
		}},
		{"folder mask links to itself", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := folder(t, dir)
			p := filepath.Join(dir, "masks", "02.png")
			os.Remove(p)
			symlink(t, "02.png", p)
			return cfg, p
		}},
		{"folder masks directory cycle", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := folder(t, dir)
			p := filepath.Join(dir, "masks")
			os.RemoveAll(p)
			symlink(t, "other", p)
			symlink(t, "masks", filepath.Join(dir, "other"))
			return cfg, p
		}},
		{"folder data.path links to itself", func(t *testing.T, dir string) (SourceConfig, string) {
			p := filepath.Join(dir, "ds")
			symlink(t, "ds", p)
			return folderConfig(p), p
		}},
		{"VOC image links to itself", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := voc(t, dir)
			p := filepath.Join(dir, "JPEGImages", "2007_000001.jpg")
			os.Remove(p)
			symlink(t, "2007_000001.jpg", p)
			return cfg, p
		}},
		{"VOC mask links to itself", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := voc(t, dir)
			p := filepath.Join(dir, "SegmentationClass", "2007_000002.png")
			os.Remove(p)
			symlink(t, "2007_000002.png", p)
			return cfg, p
		}},
		{"VOC list links to itself", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := voc(t, dir)
			p := filepath.Join(dir, vocTrainList)
			os.Remove(p)
			symlink(t, "train.txt", p)
			return cfg, p
		}},
		{"VOC JPEGImages directory cycle", func(t *testing.T, dir string) (SourceConfig, string) {
			cfg := voc(t, dir)
			p := filepath.Join(dir, "JPEGImages")
			os.RemoveAll(p)
			symlink(t, "Images", p)
			symlink(t, "JPEGImages", filepath.Join(dir, "Images"))
			return cfg, p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, p := tc.make(t, t.TempDir())
			_, err := Open(cfg)
			if err == nil || !strings.Contains(err.Error(), p+": ") || !strings.Contains(err.Error(), "symlink loop") {
				t.Errorf("Open: %v; want %s named as a symlink loop", err, p)
			}
			rep, err := Check(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if text := reportText(rep); !strings.Contains(text, "error: "+p+": ") || !strings.Contains(text, "symlink loop") {
				t.Errorf("report:\n%s", text)
			}
		})
	}
}

// A broken symbolic link to an image or mask is an error naming it (the
// sample would be lost silently otherwise); one to another kind of file is
// a warning that it is ignored.
func TestBrokenSymlinks(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
	img := filepath.Join(dir, "images", "09.png")
	symlink(t, filepath.Join(dir, "elsewhere", "09.png"), img)
	notes := filepath.Join(dir, "masks", "notes.txt")
	symlink(t, "gone.txt", notes)
	rep, err := Check(folderConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	text := reportText(rep)
	for _, w := range []string{
		"error: " + img + ": is a broken symbolic link: its target " + filepath.Join(dir, "elsewhere", "09.png") + " does not exist",
		"warning: " + notes + ": ignored: is a broken symbolic link",
		"problems: 2 (1 errors, 1 warnings)",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("report lacks %q:\n%s", w, text)
		}
	}
}

// Writing into a folder that is a symlink loop names the loop.
func TestWriteFolderSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	symlink(t, "out", out)
	syn := mustSynthetic(t, SyntheticConfig{Count: 2, Size: 16})
	err := WriteFolder(syn, out)
	if err == nil || !strings.Contains(err.Error(), "lies in "+out+", a symlink loop") || !strings.Contains(err.Error(), out+" -> "+out) {
		t.Errorf("WriteFolder into a loop: %v", err)
	}
}
