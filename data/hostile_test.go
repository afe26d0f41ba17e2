package data

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// pngHeaderOnly is a PNG that declares w x h 8-bit RGB pixels and holds
// none: decoding it would allocate 4*w*h bytes before finding out.
func pngHeaderOnly(w, h uint32) []byte {
	chunk := func(typ string, data []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
		b = append(b, typ...)
		b = append(b, data...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0) // 8-bit RGB, no interlace
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, chunk("IHDR", ihdr)...)
	return append(out, chunk("IEND", nil)...)
}

// hostileFolder is a folder dataset of one good pair plus, as images/x.png
// (and its mask), what the case names: a named pipe, a link to /dev/zero,
// a socket, or a header-only PNG of 40000x40000 pixels.
func hostileFolder(t *testing.T, kind string) (dir, bad string) {
	t.Helper()
	dir = t.TempDir()
	grayFolder(t, dir, 2, 16, 16, []uint8{0, 255})
	bad = filepath.Join(dir, "images", "x.png")
	writeFile(t, filepath.Join(dir, "masks", "x.png"), pngHeaderOnly(16, 16))
	switch kind {
	case "fifo":
		if err := syscall.Mkfifo(bad, 0o644); err != nil {
			t.Fatal(err)
		}
	case "zero":
		if err := os.Symlink("/dev/zero", bad); err != nil {
			t.Fatal(err)
		}
	case "socket":
		l, err := net.Listen("unix", bad)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	case "bomb":
		writeFile(t, bad, pngHeaderOnly(40000, 40000))
	}
	return dir, bad
}

// TestScanRefusesWhatIsNotAnImage: a FIFO (which would block the scan for
// ever), a /dev/zero link (endless), a socket, or a header-only PNG of 1.6
// billion pixels in the data folder is a problem naming the file, found
// without opening the first three and without allocating for the last.
func TestScanRefusesWhatIsNotAnImage(t *testing.T) {
	for _, tc := range []struct{ kind, want string }{
		{"fifo", "named pipe"},
		{"zero", "is a device, not a file"},
		{"socket", "is a socket, not a file"},
		{"bomb", "larger than the"},
	} {
		dir, bad := hostileFolder(t, tc.kind)
		done := make(chan *Report, 1)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		go func() {
			rep, err := Check(SourceConfig{Config: Config{Source: SourceFolder, Path: dir, ValFraction: 0.5}, Channels: 3, Classes: 2})
			if err != nil {
				t.Error(err)
			}
			done <- rep
		}()
		select {
		case rep := <-done:
			runtime.ReadMemStats(&after)
			if rep == nil {
				continue
			}
			found := false
			for _, p := range rep.Fatal() {
				found = found || strings.Contains(p.Error(), bad) && strings.Contains(p.Error(), tc.want)
			}
			if !found {
				t.Errorf("%s: problems %v, want one naming %s and %q", tc.kind, rep.Problems, bad, tc.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
				t.Errorf("%s: the scan allocated %d bytes", tc.kind, got)
			}
		case <-time.After(60 * time.Second): // a watchdog: unrefused, a FIFO blocks for ever
			t.Fatalf("%s: the scan did not return", tc.kind)
		}
	}
}

// TestScanStopsWhenCancelled: a scan whose context is done stops before
// reading every file and says why.
func TestScanStopsWhenCancelled(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 40, 16, 16, []uint8{0, 255})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := OpenContext(ctx, SourceConfig{Config: Config{Source: SourceFolder, Path: dir, ValFraction: 0.5}, Channels: 3, Classes: 2})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), dir) {
		t.Errorf("a cancelled scan: %v", err)
	}
	cfg := SourceConfig{Config: Config{Source: SourceSynthetic, ValFraction: 0.5, Count: 1000, Size: 16, Noise: 0.1}, Channels: 3, Classes: 4}
	if _, err := CheckContext(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled check of the synthetic set: %v", err)
	}
}

// TestBudgetBoundsConcurrentDecodes: decodes that each take 40% of the
// budget run two at a time, not one per goroutine; one larger than the
// budget runs alone.
func TestBudgetBoundsConcurrentDecodes(t *testing.T) {
	b := newBudget(100)
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for k := range 12 {
		wg.Go(func() {
			n := int64(40)
			if k == 5 {
				n = 250
			}
			release := b.acquire(n)
			now := held.Add(n)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			if n > 100 && now != n {
				t.Errorf("a decode larger than the budget ran beside others (%d held)", now)
			}
			time.Sleep(time.Millisecond)
			held.Add(-n)
			release()
		})
	}
	wg.Wait()
	if m := most.Load(); m > 250 || (m > 100 && m != 250) {
		t.Errorf("at most %d bytes held at once, budget 100", m)
	}
}

// TestBadInputs: each bad input is an error naming the file and the
// problem, found by Open, before any training.
func TestBadInputs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, dir string) SourceConfig
		wants []string
	}{
		{"truncated PNG image", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			p := filepath.Join(dir, "images", "02.png")
			b, _ := os.ReadFile(p)
			writeFile(t, p, b[:len(b)/2])
			return folderConfig(dir)
		}, []string{"images/02.png", "truncated"}},
		{"truncated PNG mask", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			p := filepath.Join(dir, "masks", "01.png")
			b, _ := os.ReadFile(p)
			writeFile(t, p, b[:len(b)-20])
			return folderConfig(dir)
		}, []string{"masks/01.png", "truncated"}},
		{"not an image", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			writeFile(t, filepath.Join(dir, "images", "03.png"), []byte("hello"))
			return folderConfig(dir)
		}, []string{"images/03.png", "not a PNG, JPEG or GIF"}},
		{"mask size differs", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			writeFile(t, filepath.Join(dir, "masks", "01.png"), encodePNG(t, image.NewGray(image.Rect(0, 0, 16, 12))))
			return folderConfig(dir)
		}, []string{"masks/01.png", "is 12x16", "images/01.png", "is 16x16", "size of its image"}},
		{"mask value outside the classes", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			m := image.NewGray(image.Rect(0, 0, 16, 16))
			m.Pix[17] = 7
			writeFile(t, filepath.Join(dir, "masks", "02.png"), encodePNG(t, m))
			cfg := folderConfig(dir)
			cfg.MaskValues = []int{0, 255}
			return cfg
		}, []string{"masks/02.png", "mask value 7 (1 pixels) is not a class", "data.mask_values is [0 255]"}},
		{"VOC mask value outside the classes", func(t *testing.T, dir string) SourceConfig {
			vocLike(t, dir, [][2]int{{16, 16}, {16, 16}, {16, 16}}, nil)
			m := image.NewPaletted(image.Rect(0, 0, 16, 16), vocPalette())
			m.Pix[0], m.Pix[1] = 30, 31
			writeFile(t, filepath.Join(dir, "SegmentationClass", "2007_000001.png"), encodePNG(t, m))
			return SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
		}, []string{"SegmentationClass/2007_000001.png", "mask values [30 31] (2 pixels) is not a class", "model.classes 3", "raise model.classes"}},
		{"too many discovered values", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 100, 200})
			return folderConfig(dir) // 2 classes
		}, []string{"masks/", "3 distinct values [0 100 200]", "model.classes is 2", "data.mask_values"}},
		{"color mask", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			m := image.NewRGBA(image.Rect(0, 0, 16, 16))
			for k := 3; k < len(m.Pix); k += 4 {
				m.Pix[k] = 255
			}
			m.Pix[4*3] = 200
			writeFile(t, filepath.Join(dir, "masks", "00.png"), encodePNG(t, m))
			return folderConfig(dir)
		}, []string{"masks/00.png", "color image", "x=3, y=0"}},
		{"image without mask", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			os.Remove(filepath.Join(dir, "masks", "03.png"))
			return folderConfig(dir)
		}, []string{"images/03.png", "has no mask", "masks/03.png"}},
		{"two images with one stem", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			b, _ := os.ReadFile(filepath.Join(dir, "images", "01.png"))
			writeFile(t, filepath.Join(dir, "images", "01.tif"), b)
			return folderConfig(dir)
		}, []string{"images/01.tif: has the same name as ", "images/01.png", "rename one, since a mask matches an image by name"}},
		{"two masks for one image", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 4, 16, 16, []uint8{0, 255})
			b, _ := os.ReadFile(filepath.Join(dir, "masks", "02.png"))
			writeFile(t, filepath.Join(dir, "masks", "02.gif"), b)
			return folderConfig(dir)
		}, []string{"images/02.png: has 2 masks, 02.gif and 02.png; keep one"}},
		{"VOC image without mask", func(t *testing.T, dir string) SourceConfig {
			vocLike(t, dir, [][2]int{{16, 16}, {16, 16}, {16, 16}}, nil)
			os.Remove(filepath.Join(dir, "SegmentationClass", "2007_000002.png"))
			return SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
		}, []string{"JPEGImages/2007_000002.jpg", "has no mask", "train.txt line 3"}},
		{"mask suffix not set", func(t *testing.T, dir string) SourceConfig {
			carvanaLike(t, dir, 3, 16, 16)
			return folderConfig(dir)
		}, []string{"masks: no mask matches its image", "data.mask_suffix: \"_mask\""}},
		{"empty dataset", func(t *testing.T, dir string) SourceConfig {
			os.MkdirAll(filepath.Join(dir, "images"), 0o755)
			os.MkdirAll(filepath.Join(dir, "masks"), 0o755)
			writeFile(t, filepath.Join(dir, "images", "notes.txt"), []byte("x"))
			return folderConfig(dir)
		}, []string{"images", "no images: the dataset is empty"}},
		{"VOC empty list", func(t *testing.T, dir string) SourceConfig {
			vocLike(t, dir, nil, nil)
			os.MkdirAll(filepath.Join(dir, "JPEGImages"), 0o755)
			os.MkdirAll(filepath.Join(dir, "SegmentationClass"), 0o755)
			return SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
		}, []string{"train.txt", "lists no ids: the dataset is empty"}},
		{"one sample", func(t *testing.T, dir string) SourceConfig {
			grayFolder(t, dir, 1, 16, 16, []uint8{0, 255})
			return folderConfig(dir)
		}, []string{"1 usable sample", "at least 2"}},
		{"missing folder", func(t *testing.T, dir string) SourceConfig {
			return folderConfig(filepath.Join(dir, "nope"))
		}, []string{"nope: does not exist", "data.path"}},
		{"missing masks folder", func(t *testing.T, dir string) SourceConfig {
			os.MkdirAll(filepath.Join(dir, "images"), 0o755)
			return folderConfig(dir)
		}, []string{"masks: does not exist", "DIR/images/ and DIR/masks/"}},
		{"VOC root one level up", func(t *testing.T, dir string) SourceConfig {
			vocLike(t, filepath.Join(dir, "VOC2012"), [][2]int{{16, 16}, {16, 16}}, nil)
			return SourceConfig{Config: Config{Source: SourceVOC, Path: dir, ValFraction: 0.3}, Channels: 3, Classes: 3}
		}, []string{"JPEGImages: does not exist", "did you mean data.path: ", "VOC2012"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tc.make(t, dir)
			_, err := Open(cfg)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			// Check reports the same problem instead of failing.
			rep, cerr := Check(cfg)
			if cerr != nil || rep == nil || len(rep.Fatal()) == 0 {
				t.Fatalf("Check: %v, report %+v", cerr, rep)
			}
			var out bytes.Buffer
			rep.Write(&out)
			if !strings.Contains(out.String(), "error: ") {
				t.Errorf("report does not list the error:\n%s", out.String())
			}
		})
	}
}
