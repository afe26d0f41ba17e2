package config

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/configs"
)

// TestLoadRefusesWhatIsNotAConfigFile: a FIFO (no writer: reading would
// wait for ever), a link to /dev/zero (endless), a socket and a 50 MB file
// are each refused by name, unread: nothing is allocated for them.
func TestLoadRefusesWhatIsNotAConfigFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.yaml")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	huge := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	// A 13M-element list: "x: [0,0,0,...]", 26 MB written as a sparse 50 MB file.
	if _, err := f.WriteString("x: [" + strings.Repeat("0,", 1<<10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct{ path, want string }{
		{fifo, "named pipe"},
		{zero, "device"},
		{sock, "socket"},
		{huge, "52428800 bytes"},
	} {
		done := make(chan error, 1)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		go func() {
			_, err := Load(tc.path, nil)
			done <- err
		}()
		select {
		case err := <-done:
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load(%s): %v, want an error naming it and %q", tc.path, err, tc.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Errorf("Load(%s) allocated %d bytes before refusing it", tc.path, got)
			}
		case <-time.After(30 * time.Second): // a watchdog, not a time limit: unrefused, a FIFO blocks for ever
			t.Fatalf("Load(%s) did not return", tc.path)
		}
	}
}

// TestLoadBuiltInByName: --config quickstart (or fp16.yaml) reads the
// embedded config where no such file exists; an existing file of that name
// wins; a path with a folder is never taken for a name; a name that is
// neither lists the built-in ones.
func TestLoadBuiltInByName(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, name := range configs.Names() {
		for _, arg := range []string{name, name + ".yaml"} {
			cfg, err := Load(arg, nil)
			if err != nil {
				t.Errorf("Load(%q): %v", arg, err)
				continue
			}
			src, _ := configs.Read(name)
			want, err := Parse(name, src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := cfg.Marshal(); string(got) != string(mustMarshal(t, want)) {
				t.Errorf("Load(%q) is not configs/%s.yaml", arg, name)
			}
		}
	}
	if err := os.WriteFile("fp16", []byte("train:\n  steps: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := Load("fp16", nil); err != nil || cfg.Train.Steps != 7 {
		t.Errorf("Load(fp16) with a file fp16 here: steps %d, %v; want the file's 7", cfg.Train.Steps, err)
	}
	for _, arg := range []string{"configs/quickstart.yaml", "quickstrat"} {
		_, err := Load(arg, nil)
		if err == nil || !strings.Contains(err.Error(), arg+" does not exist") || !strings.Contains(err.Error(), "quickstart, ") {
			t.Errorf("Load(%q): %v, want it named as missing and the built-in configs listed", arg, err)
		}
	}
	_, err := Load("quickstart", []string{"train.lr=x"})
	if err == nil || !strings.HasPrefix(err.Error(), "quickstart (built-in): --set: train.lr") {
		t.Errorf("an error in a built-in config: %v, want it named quickstart (built-in)", err)
	}
}

func mustMarshal(t *testing.T, c Config) []byte {
	t.Helper()
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTypeErrorsShowTheKeysShape: a value of the wrong type gets an example
// of the right one for that key, not another key's.
func TestTypeErrorsShowTheKeysShape(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"data.resize=64", "want a list of integers, e.g. [64, 64] (height, width)"},
		{"train.betas=0.9", "want a list of numbers, e.g. [0.9, 0.999]"},
		{"data.augment.crop_scale=0.5", "e.g. [0.5, 1]"},
		{"train.freeze=3", "want a list of names, e.g. [encoder]"},
		{"data.size=big", "want an integer, e.g. 32"},
		{"train.steps=1.5", "want an integer, e.g. 800"},
		{"train.lr=fast", "want a number, e.g. 0.003"},
		{"model.up=[1]", "want a string, e.g. bilinear"},
		{"data.flip=7", "want true or false"},
	} {
		_, err := Parse("x.yaml", nil, []string{tc.set})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: %v, want %q", tc.set, err, tc.want)
		}
		if err != nil && tc.set != "train.betas=0.9" && strings.Contains(err.Error(), "0.999") {
			t.Errorf("--set %s: %v shows Adam's betas", tc.set, err)
		}
	}
}

// TestPathWithSyntheticData: data.path without data.source folder or voc
// would train on the built-in shapes without a word; it is an error naming
// data.source.
func TestPathWithSyntheticData(t *testing.T) {
	_, err := Parse("x.yaml", nil, []string{"data.path=/data/shapes"})
	if err == nil || !strings.Contains(err.Error(), "data.path") || !strings.Contains(err.Error(), "data.source is synthetic") ||
		!strings.Contains(err.Error(), "data.source: folder") {
		t.Errorf("data.path with the synthetic source: %v", err)
	}
}

// FuzzLoadSizes writes a config file of head then fill repeated up to size
// bytes (0 to 2 MiB: long lists, deep nesting, anchors and aliases, endless
// comments) and loads it: never a panic; a file over MaxFileBytes is
// refused by its size before it is read; below that, an error names the
// file, and parsing costs at most a few hundred bytes a byte of input, so
// no file Load reads can cost gigabytes.
func FuzzLoadSizes(f *testing.F) {
	f.Add([]byte("train:\n  steps: 5\n"), []byte("# a comment\n"), uint32(4096))
	f.Add([]byte("data:\n  mask_values: ["), []byte("0,"), uint32(1<<20-100))
	f.Add([]byte("a: &a [1,2]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"), []byte("c: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"), uint32(2000))
	f.Add([]byte("x:\n"), []byte("- 0\n"), uint32(1<<20+1))
	f.Add([]byte(""), []byte("["), uint32(100000))
	f.Fuzz(func(t *testing.T, head, fill []byte, size uint32) {
		size %= 2 << 20
		b := make([]byte, 0, size)
		b = append(b, head...)
		for len(fill) > 0 && len(b) < int(size) {
			b = append(b, fill...)
		}
		b = b[:min(len(b), max(int(size), len(head)))]
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Load(path, nil)
		runtime.ReadMemStats(&after)
		switch {
		case len(b) > MaxFileBytes:
			if err == nil || !strings.Contains(err.Error(), "more than the 1048576") {
				t.Fatalf("a file of %d bytes: %v", len(b), err)
			}
		case err != nil && !strings.Contains(err.Error(), path):
			t.Fatalf("error %q does not name the file", err)
		}
		if cost := after.TotalAlloc - before.TotalAlloc; cost > 512<<20 {
			t.Fatalf("loading %d bytes allocated %d", len(b), cost)
		}
	})
}
