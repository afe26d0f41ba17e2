package outdir

import (
	"bufio"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child of the test binary that holds a lock until killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("OUTDIR_TEST_HOLD"); dir != "" {
		if _, err := Acquire(dir, "outdir test holder"); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSecondWriterRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		useFlock bool
		kind     string
	}{{"flock", true, "flock"}, {"lock file", false, "lock file"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "runs", "same")
			first, err := acquire(dir, "memunet train", tc.useFlock)
			if err != nil {
				t.Fatal(err)
			}
			if first.Kind() != tc.kind {
				t.Fatalf("kind %q, want %q", first.Kind(), tc.kind)
			}
			_, err = acquire(dir, "memunet predict", tc.useFlock)
			var inUse *InUseError
			if !errors.As(err, &inUse) {
				t.Fatalf("second acquire: %v, want an InUseError", err)
			}
			if inUse.Holder.PID != os.Getpid() || inUse.Holder.Command != "memunet train" || inUse.Stale {
				t.Fatalf("holder %+v", inUse)
			}
			msg := err.Error()
			for _, want := range []string{dir + " is in use by memunet train (pid " + fmt.Sprint(os.Getpid()), "choose another --out"} {
				if !strings.Contains(msg, want) {
					t.Fatalf("%q lacks %q", msg, want)
				}
			}
			if err := first.Release(); err != nil {
				t.Fatal(err)
			}
			again, err := acquire(dir, "memunet predict", tc.useFlock)
			if err != nil {
				t.Fatalf("after release: %v", err)
			}
			again.Release()
		})
	}
}

// A lock file left by a process of this host that has ended is taken; one
// of another host is not, and the error says how to clear it.
func TestStaleLockFile(t *testing.T) {
	dir := t.TempDir()
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	write := func(h Holder) {
		f, err := os.Create(filepath.Join(dir, LockName))
		if err != nil {
			t.Fatal(err)
		}
		if err := writeHolder(f, h); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	write(Holder{PID: ended.ProcessState.Pid(), Host: hostname(), Command: "memunet train", Since: time.Now()})
	l, err := acquire(dir, "memunet train", false)
	if err != nil {
		t.Fatalf("stale lock of an ended process: %v", err)
	}
	l.Release()
	write(Holder{PID: 1, Host: "elsewhere", Command: "memunet train", Since: time.Now()})
	_, err = acquire(dir, "memunet train", false)
	var inUse *InUseError
	if !errors.As(err, &inUse) || !inUse.Stale || !strings.Contains(err.Error(), "delete "+filepath.Join(dir, LockName)) {
		t.Fatalf("lock of another host: %v", err)
	}
}

// A process killed while it holds the lock leaves nothing to clean up.
func TestKilledHolderReleases(t *testing.T) {
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "OUTDIR_TEST_HOLD="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		t.Fatalf("child: %q", line)
	}
	_, err = Acquire(dir, "memunet train")
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.Holder.PID != child.Process.Pid || inUse.Holder.Command != "outdir test holder" {
		t.Fatalf("while the child holds it: %v", err)
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	l, err := Acquire(dir, "memunet train")
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}

func TestAcquireNamesAFileInTheWay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notadir")
	os.WriteFile(file, []byte("x"), 0o644)
	_, err := Acquire(file, "memunet train")
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("got %v", err)
	}
}

// TestCreateCommitOrClose: a Pending file appears at its name only on
// Commit; closed without it, nothing of it remains and a file already at
// the name is as it was.
func TestCreateCommitOrClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.pprof")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("after Close the folder holds %d entries, want only %s", len(entries), path)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after Close %s holds %q, want it as it was", path, b)
	}
	if p, err = Create(path); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Write([]byte("new"))
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("after Commit %s holds %q", path, b)
	}
	if _, err := p.Write([]byte("late")); err == nil {
		t.Errorf("a write after Commit was taken")
	}
	if _, err := Create(filepath.Join(dir, "no", "such", "dir", "p")); err == nil {
		t.Errorf("Create in a missing folder succeeded")
	}
}

// TestAcquireRefusesALinkAtTheLock: a symlink planted at DIR/.lock, to a
// file or to nothing, is refused by name (flock and lock file alike); its
// target is neither written nor made, and the link stays.
func TestAcquireRefusesALinkAtTheLock(t *testing.T) {
	for _, tc := range []struct {
		name     string
		useFlock bool
		dangling bool
	}{{"flock", true, false}, {"flock, dangling", true, true}, {"lock file", false, false}, {"lock file, dangling", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			target := filepath.Join(root, "precious")
			if !tc.dangling {
				if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(root, "run")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, LockName)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			l, err := acquire(dir, "memunet train", tc.useFlock)
			if err == nil {
				l.Release()
				t.Fatalf("a link at %s was taken for the lock", link)
			}
			if !strings.Contains(err.Error(), link) {
				t.Errorf("error %q does not name %s", err, link)
			}
			b, rerr := os.ReadFile(target)
			switch {
			case tc.dangling && !errors.Is(rerr, os.ErrNotExist):
				t.Errorf("the dangling link's target was made: %q, %v", b, rerr)
			case !tc.dangling && string(b) != "keep":
				t.Errorf("the link's target became %q (%v)", b, rerr)
			}
			if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s is no longer the link: %v", link, err)
			}
		})
	}
}

func TestWriteFileReplacesPlantedLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere.txt")
	os.WriteFile(target, []byte("keep me"), 0o644)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	path := filepath.Join(out, "curves.png")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Fatalf("the link's target was written: %q", b)
	}
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("%s is not a plain file: %v %v", path, st, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("content %q", b)
	}
}

func TestWriteFileLeavesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.json")
	os.WriteFile(path, []byte("old"), 0o644)
	boom := errors.New("disk full")
	err := WriteFile(path, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("content %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestWritePNG: the picture reads back as written, and an error names the
// file it could not write.
func TestWritePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.png")
	img := image.NewGray(image.Rect(0, 0, 3, 2))
	img.Pix[4] = 200
	if err := WritePNG(path, img); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := png.Decode(f)
	if g, ok := back.(*image.Gray); err != nil || !ok || g.Bounds() != img.Bounds() || string(g.Pix) != string(img.Pix) {
		t.Fatalf("read back %v, %v", back, err)
	}
	missing := filepath.Join(t.TempDir(), "no", "p.png")
	if err := WritePNG(missing, img); err == nil || !strings.Contains(err.Error(), "writing "+missing) {
		t.Errorf("into a missing folder: %v", err)
	}
}

func TestWithin(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "images")
	os.Mkdir(in, 0o755)
	link := filepath.Join(root, "link")
	os.Symlink(in, link)
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{in, in, true},
		{filepath.Join(in, "new", "deeper"), in, true},
		{filepath.Join(link, "out"), in, true},
		{in + "-masks", in, false},
		{root, in, false},
		{filepath.Join(root, "out"), link, false},
	} {
		if got := Within(tc.path, tc.dir); got != tc.want {
			t.Errorf("Within(%s, %s) = %v", tc.path, tc.dir, got)
		}
	}
}

// Clear leaves the folder as Acquire found it: a folder it made is gone,
// one that was there stays without a lock file.
func TestAbandon(t *testing.T) {
	for _, useFlock := range []bool{true, false} {
		made := filepath.Join(t.TempDir(), "runs", "new")
		l, err := acquire(made, "memunet train", useFlock)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Clear(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(made); !os.IsNotExist(err) {
			t.Errorf("flock %v: the folder Acquire made is still there: %v", useFlock, err)
		}
		there := t.TempDir()
		l, err = acquire(there, "memunet train", useFlock)
		if err != nil {
			t.Fatal(err)
		}
		l.Clear()
		if entries, err := os.ReadDir(there); err != nil || len(entries) != 0 {
			t.Errorf("flock %v: the folder that was there holds %v (%v), want nothing", useFlock, entries, err)
		}
	}
}

// Append refuses a symlink planted where a log goes.
func TestAppendRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	os.WriteFile(target, []byte("keep"), 0o644)
	link := filepath.Join(dir, "metrics.jsonl")
	os.Symlink(target, link)
	for _, truncate := range []bool{true, false} {
		if f, err := Append(link, truncate); err == nil {
			f.Close()
			t.Errorf("truncate %v: appending through a link was allowed", truncate)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the target became %q", b)
	}
	f, err := Append(filepath.Join(dir, "log"), false)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestSubfolderRefusesALink: a link planted where an output folder's
// subfolder goes (RUN/checkpoints, RUN/tb) is refused and not followed;
// a real folder is taken, a missing one made, a file refused.
func TestSubfolderRefusesALink(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	planted := filepath.Join(dir, "checkpoints")
	if err := os.Symlink(elsewhere, planted); err != nil {
		t.Fatal(err)
	}
	err := Subfolder(planted)
	if err == nil || !strings.Contains(err.Error(), planted+" is a link (to "+elsewhere+")") {
		t.Errorf("a planted link: %v", err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("the link's target got %d entries", len(entries))
	}
	if err := Subfolder(filepath.Join(dir, "a", "tb")); err != nil {
		t.Errorf("a new folder: %v", err)
	}
	if err := Subfolder(filepath.Join(dir, "a", "tb")); err != nil {
		t.Errorf("the same folder again: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Subfolder(file); err == nil || !strings.Contains(err.Error(), ": is a regular file, not a folder") {
		t.Errorf("a file: %v", err)
	}
	if err := NotALink(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("nothing there: %v", err)
	}
}
