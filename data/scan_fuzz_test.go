package data

import (
	"image"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scanNames and scanExts are the names the folder fuzzer gives its files:
// ordinary, odd (spaces, unicode, case, dots, a leading dash or dot) and
// colliding ones, with the extensions the scan reads and others.
var (
	scanNames = []string{"a", "b", "A", "a b", "ü-ñ", "a.b", "-x", ".hidden", "a_mask", "0001", strings.Repeat("n", 200), "a\tb"}
	scanExts  = []string{".png", ".PNG", ".gif", ".jpg", ".jpeg", ".txt", ""}
)

// scanKinds are what an entry of the folder fuzzer is.
const (
	kindImage     = iota // a PNG image or mask of the size byte's pixels
	kindTruncated        // the same, cut short
	kindEmpty            // 0 bytes
	kindFIFO
	kindZero   // a link to /dev/zero
	kindBroken // a link to nothing
	kindLoop   // a link to itself
	kindDir    // a folder with an image's name
	kindSocket
	kindBomb // a header declaring 40000x40000 pixels
	kindColor
	numKinds
)

// FuzzFolderScan builds a folder dataset from its input (each 4 bytes an
// entry: images/ or masks/, a kind, a name, a size) and scans it with Check
// and Open: whatever the folder holds (named pipes, sockets, links to
// /dev/zero, loops, folders named like images, empty, truncated, colored or
// header-only files, odd and colliding names), neither panics nor hangs;
// every problem names a file in the folder; Open succeeds only where Check
// finds nothing fatal, and then every sample reads or fails naming a file.
func FuzzFolderScan(f *testing.F) {
	f.Add([]byte{0, kindImage, 0, 16, 1, kindImage, 0, 16, 0, kindImage, 1, 16, 1, kindImage, 1, 16})
	f.Add([]byte{0, kindFIFO, 0, 0, 1, kindImage, 0, 8, 0, kindZero, 1, 0, 1, kindImage, 1, 8})
	f.Add([]byte{0, kindSocket, 2, 0, 0, kindBomb, 3, 0, 1, kindLoop, 3, 0, 0, kindDir, 4, 0, 1, kindBroken, 5, 0})
	f.Add([]byte{0, kindTruncated, 0, 40, 1, kindEmpty, 0, 0, 0, kindColor, 9, 12, 1, kindColor, 9, 12, 0, kindImage, 10, 3})
	f.Fuzz(func(t *testing.T, spec []byte) {
		dir := t.TempDir()
		for _, sub := range []string{"images", "masks"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for k := 0; k+4 <= len(spec) && k < 4*16; k += 4 {
			sub := []string{"images", "masks"}[spec[k]%2]
			name := scanNames[int(spec[k+2])%len(scanNames)] + scanExts[int(spec[k+2])/len(scanNames)%len(scanExts)]
			makeEntry(t, filepath.Join(dir, sub, name), int(spec[k+1])%numKinds, int(spec[k+3]))
		}
		cfg := SourceConfig{Config: Config{Source: SourceFolder, Path: dir, ValFraction: 0.5}, Channels: 3, Classes: 3, MaxPixels: 1 << 16}
		var rep *Report
		var set *Set
		var openErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			var err error
			if rep, err = Check(cfg); err != nil {
				t.Errorf("Check: %v", err)
			}
			set, openErr = Open(cfg)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute): // a watchdog: a FIFO opened for reading blocks for ever
			t.Fatal("the scan did not return")
		}
		if rep == nil {
			return
		}
		for _, p := range rep.Problems {
			if !strings.Contains(p.Error(), dir) {
				t.Errorf("problem %q names no file of the folder", p.Error())
			}
		}
		if (openErr == nil) != (len(rep.Fatal()) == 0 && rep.Train > 0) {
			t.Fatalf("Open: %v; Check: %d fatal problems, %d training samples", openErr, len(rep.Fatal()), rep.Train)
		}
		if openErr != nil {
			return
		}
		h, w := set.Data.Size()
		img, mask := make([]float32, 3*h*w), make([]uint8, h*w)
		for i := range set.Data.Len() {
			if err := set.Data.Sample(i, img, mask); err != nil && !strings.Contains(err.Error(), dir) {
				t.Errorf("sample %d: %v names no file", i, err)
			}
		}
	})
}

// makeEntry makes path the kind of entry the fuzzer asked for; size is a
// side in pixels or a length in bytes.
func makeEntry(t *testing.T, path string, kind, size int) {
	if _, err := os.Lstat(path); err == nil {
		return // a colliding name: the first one stays
	}
	side := 1 + size%24
	picture := func() []byte {
		m := image.NewGray(image.Rect(0, 0, side, side))
		for k := range m.Pix {
			m.Pix[k] = uint8(k % 3)
		}
		return encodePNG(t, m)
	}
	var err error
	switch kind {
	case kindImage:
		err = os.WriteFile(path, picture(), 0o644)
	case kindTruncated:
		b := picture()
		err = os.WriteFile(path, b[:size%len(b)], 0o644)
	case kindEmpty:
		err = os.WriteFile(path, nil, 0o644)
	case kindFIFO:
		err = syscall.Mkfifo(path, 0o644)
	case kindZero:
		err = os.Symlink("/dev/zero", path)
	case kindBroken:
		err = os.Symlink(filepath.Join(filepath.Dir(path), "nowhere"), path)
	case kindLoop:
		err = os.Symlink(path, path)
	case kindDir:
		err = os.Mkdir(path, 0o755)
	case kindSocket:
		var l net.Listener
		if l, err = net.Listen("unix", path); err == nil {
			t.Cleanup(func() { l.Close() })
		}
	case kindBomb:
		err = os.WriteFile(path, pngHeaderOnly(40000, 40000), 0o644)
	case kindColor:
		m := image.NewRGBA(image.Rect(0, 0, side, side))
		for k := range m.Pix {
			m.Pix[k] = uint8(k * 7)
		}
		err = os.WriteFile(path, encodePNG(t, m), 0o644)
	}
	if err != nil && kind != kindSocket { // a socket's path may be too long to bind: no entry
		t.Fatal(err)
	}
}
