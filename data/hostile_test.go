package data

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
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
