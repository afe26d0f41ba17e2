package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/outdir"
)

// TestDataWritersLockAndReplaceLinks: data synth and data preview hold
// their output folder (a second writer is refused by name), and a symlink
// planted where they write is replaced, its target untouched.
func TestDataWritersLockAndReplaceLinks(t *testing.T) {
	dir := t.TempDir()
	synth := filepath.Join(dir, "shapes")
	lock, err := outdir.Acquire(synth, "memunet data synth")
	if err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	if code := run([]string{"data", "synth", "--out", synth, "--count", "2", "--size", "16"}, &o, &e); code != 1 || !strings.Contains(e.String(), "is in use by memunet data synth") {
		t.Errorf("synth into a held folder: exit %d, %s", code, e.String())
	}
	lock.Release()

	target := filepath.Join(dir, "elsewhere.txt")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	preview := filepath.Join(dir, "preview", "p.png")
	if err := os.MkdirAll(filepath.Dir(preview), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, preview); err != nil {
		t.Fatal(err)
	}
	runOK(t, "data", "preview", "--config", quickstartYAML, "--set", "data.size=16", "--set", "data.count=24", "--count", "2", "--out", preview)
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	if st, err := os.Lstat(preview); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s: %v, want a regular file in place of the link", preview, err)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(preview), outdir.LockName)); err == nil {
		t.Errorf("data preview left its lock file")
	}
	runOK(t, "data", "synth", "--out", synth, "--count", "2", "--size", "16")
	if _, err := os.Lstat(filepath.Join(synth, outdir.LockName)); err == nil {
		t.Errorf("data synth left its lock file")
	}
	lock, err = outdir.Acquire(filepath.Dir(preview), "memunet data preview")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	e.Reset()
	if code := run([]string{"data", "preview", "--config", quickstartYAML, "--set", "data.size=16", "--set", "data.count=24", "--out", preview}, &o, &e); code != 1 || !strings.Contains(e.String(), "in use") {
		t.Errorf("preview into a held folder: exit %d, %s", code, e.String())
	}
}

// TestDataPreviewOutGuarded: data preview --out is refused (usage error,
// nothing written) where it could replace what is not a preview: a name
// without .png (a finished run's config.yaml, a note), a run's own file,
// a path in its checkpoints/, an image of the dataset it draws.
func TestDataPreviewOutGuarded(t *testing.T) {
	dir := t.TempDir()
	runDir, sum := trainTiny(t)
	shapes := filepath.Join(dir, "shapes")
	runOK(t, "data", "synth", "--out", shapes, "--count", "4", "--size", "16", "--classes", "3")
	note := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(note, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	synthetic := []string{"--config", quickstartYAML, "--set", "data.size=16", "--set", "data.count=24", "--count", "2"}
	folder := []string{"--config", quickstartYAML, "--set", "data.source=folder", "--set", "data.path=" + shapes,
		"--set", "model.classes=3", "--set", "data.size=16", "--count", "2"}
	for _, tc := range []struct {
		out   string
		flags []string
		want  string
	}{
		{filepath.Join(runDir, "config.yaml"), synthetic, "name a .png file"},
		{note, synthetic, "name a .png file"},
		{filepath.Join(sum.LastCheckpoint, "p.png"), synthetic, "inside the checkpoints/ of the run in"},
		{filepath.Join(runDir, "tb", "p.png"), synthetic, "inside the tb/ of the run in"},
		{filepath.Join(shapes, "images", "00000.png"), folder, "is inside " + shapes + ", which it reads"},
		{filepath.Join(shapes, "p.png"), folder, "is inside " + shapes + ", which it reads"},
	} {
		var o, e bytes.Buffer
		args := append(append([]string{"data", "preview"}, tc.flags...), "--out", tc.out)
		if code := run(args, &o, &e); code != 2 || !strings.Contains(e.String(), "--out "+tc.out) || !strings.Contains(e.String(), tc.want) {
			t.Errorf("preview --out %s: exit %d, %q: want a usage error naming it and %q", tc.out, code, e.String(), tc.want)
		}
	}
	if b, _ := os.ReadFile(note); string(b) != "keep" {
		t.Errorf("a refused preview changed %s: %q", note, b)
	}
	if b, err := os.ReadFile(filepath.Join(runDir, "config.yaml")); err != nil || bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("a refused preview replaced the run's config.yaml (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(shapes, "p.png")); err == nil {
		t.Errorf("a refused preview wrote into the dataset")
	}
	// The same flags with an --out outside the dataset draw the preview.
	runOK(t, append(append([]string{"data", "preview"}, folder...), "--out", filepath.Join(dir, "p.png"))...)
}

// TestHostileInputsInBoundedMemory runs this binary as memunet (see
// TestMain) on what a careless or hostile colleague leaves: a FIFO, a link
// to /dev/zero and a socket as --config and as an image of the data
// folder, a header-only PNG of 40000x40000 pixels there, and sparse
// safetensors files of 2 GiB as --init. Each is
// refused with the file named, and the child's peak RSS (rusage) stays
// under 100 MB, where reading /dev/zero whole took gigabytes.
func TestHostileInputsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	dir := t.TempDir()
	special := func(kind, path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "fifo":
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		case "zero":
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		case "socket":
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
		case "bomb":
			if err := os.WriteFile(path, headerOnlyPNG(40000, 40000), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	type child struct {
		name, file, want string
		args             []string
	}
	var children []child
	for _, kind := range []string{"fifo", "zero", "socket"} {
		cfg := filepath.Join(dir, kind+".yaml")
		special(kind, cfg)
		children = append(children, child{kind + " as --config", cfg, "not a regular file", []string{"plan", "--config", cfg}})
	}
	for _, kind := range []string{"fifo", "zero", "socket", "bomb"} {
		ds := filepath.Join(dir, kind+"-data")
		data := []string{"--set", "data.source=folder", "--set", "data.path=" + ds, "--set", "model.classes=2"}
		special(kind, filepath.Join(ds, "images", "a.png"))
		if err := os.MkdirAll(filepath.Join(ds, "masks"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ds, "masks", "a.png"), headerOnlyPNG(16, 16), 0o644); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"fifo": "named pipe", "zero": "device", "socket": "socket", "bomb": "larger than the"}[kind]
		img := filepath.Join(ds, "images", "a.png")
		children = append(children,
			child{kind + " in the data folder (data check)", img, want, append([]string{"data", "check", "--config", quickstartYAML}, data...)},
			child{kind + " in the data folder (train)", img, want, append([]string{"train", "--config", quickstartYAML, "--out", filepath.Join(dir, kind+"-run")}, data...)})
	}
	// Sparse safetensors files of 2 GiB (a few KiB on disk) as --init:
	// one whose header declares a tensor of 2 GiB, one whose data runs
	// 2 GiB past its only tensor. Reading the data first took 2.1 GB.
	tiny := []string{"--config", quickstartYAML, "--set", "data.size=16", "--set", "data.count=16", "--set", "train.batch_size=2",
		"--set", "model.base=4", "--set", "model.depth=1", "--set", "train.steps=1"}
	for _, sp := range []struct {
		kind, want string
		shape      []int
		dataBytes  int64
	}{
		{"declared", "checkpoint [536870912], model [4 3 3 3]", []int{1 << 29}, 1 << 31},
		{"trailing", "tensors cover 4 of the 2147483652 data bytes", []int{1}, 4 + 1<<31},
	} {
		path := filepath.Join(dir, sp.kind+".safetensors")
		sparseSafetensors(t, path, "inc.double_conv.0.weight", sp.shape, sp.dataBytes)
		args := append([]string{"train", "--out", filepath.Join(dir, sp.kind+"-run"), "--init", path}, tiny...)
		children = append(children, child{"a sparse 2 GiB --init, " + sp.kind, path, sp.want, args})
	}
	for _, c := range children {
		// A watchdog, not a time limit: unrefused, a FIFO blocks for ever.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], c.args...)
		peak := measurePeakRSS(t, cmd)
		var stderr bytes.Buffer // and stdout: data check reports there
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		hung := ctx.Err() != nil
		cancel()
		if hung {
			t.Errorf("%s: still running after 2 minutes", c.name)
			continue
		}
		if err == nil || !strings.Contains(stderr.String(), c.file) || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: %v, stderr %q; want a refusal naming %s (%s)", c.name, err, stderr.String(), c.file, c.want)
		}
		rss := peak()
		t.Logf("%s: refused in %.2f s, peak RSS %.1f MB", c.name, took.Seconds(), float64(rss)/1e6)
		if rss >= 100e6 {
			t.Errorf("%s: peak RSS %d bytes, want under 100 MB", c.name, rss)
		}
	}
}

// sparseSafetensors writes at path a safetensors file of one F32 tensor
// of shape whose header gives it the first 4*numel bytes of dataBytes, the
// data a hole (a sparse file: its header on disk, gigabytes in size).
func sparseSafetensors(t *testing.T, path, name string, shape []int, dataBytes int64) {
	t.Helper()
	numel := int64(1)
	for _, d := range shape {
		numel *= int64(d)
	}
	hdr, err := json.Marshal(map[string]any{name: map[string]any{"dtype": "F32", "shape": shape, "data_offsets": []int64{0, 4 * numel}}})
	if err != nil {
		t.Fatal(err)
	}
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	b := append(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))), hdr...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(len(b))+dataBytes); err != nil {
		t.Fatal(err)
	}
}
