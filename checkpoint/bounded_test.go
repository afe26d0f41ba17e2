package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/safetensors"
)

// tinyConfig is a model of a few thousand parameters.
func tinyConfig() config.Config {
	cfg := config.Default()
	cfg.Model.Base, cfg.Model.Depth, cfg.Model.Classes = 4, 1, 2
	cfg.Model.Groups = 2
	return cfg
}

// saveRun writes a run checkpoint of a tiny model at RUN/checkpoints/step-1
// and returns the run directory and the checkpoint.
func saveRun(t testing.TB, run string) (string, string) {
	return saveRunClaiming(t, run, tinyConfig())
}

// saveRunClaiming is saveRun with claimed as the manifest's configuration
// (the tensors stay tinyConfig's).
func saveRunClaiming(t testing.TB, run string, claimed config.Config) (string, string) {
	t.Helper()
	cfg := tinyConfig()
	net, err := model.New(model.NewDevice(cpu.New(), memory.Options{}), cfg.ModelConfig(), cfg.Model.Seed)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Free()
	cm, err := ConfigMap(claimed)
	if err != nil {
		t.Fatal(err)
	}
	writeTensors := func(ts []safetensors.Tensor) func(io.Writer) error {
		return func(w io.Writer) error { return safetensors.Write(w, ts, nil) }
	}
	parts := []Part{
		{Name: ModelFile, Write: writeTensors(StateDict(net))},
		{Name: OptimizerFile, Write: writeTensors(nil)},
	}
	dir, err := Save(filepath.Join(run, CheckpointsDir), Name(1, 1), parts, func(sums map[string]Sum) ([]byte, error) {
		return json.Marshal(Manifest{Format: Format, FormatVersion: FormatVersion, Serial: 1, Step: 1, Config: cm, Files: sums})
	})
	if err != nil {
		t.Fatal(err)
	}
	return run, dir
}

// replaceWith replaces path by a FIFO or by a link to /dev/zero.
func replaceWith(t testing.TB, path, kind string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var err error
	if kind == "fifo" {
		err = syscall.Mkfifo(path, 0o644)
	} else {
		err = os.Symlink("/dev/zero", path)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// boundedCase is a file of a checkpoint (or an init file) made endless or
// blocking, and the reads that must refuse it.
type boundedCase struct {
	name string
	file string // in the checkpoint: a name; "init": a file beside the run
	kind string // fifo or zero
}

func boundedCases() []boundedCase {
	var out []boundedCase
	for _, file := range []string{ManifestName, ManifestSumName, ModelFile, "init"} {
		for _, kind := range []string{"fifo", "zero"} {
			out = append(out, boundedCase{name: file + "/" + kind, file: file, kind: kind})
		}
	}
	return out
}

// refuseBounded plants the case in a fresh run and checks that every read
// of it is refused with the file named, as not a regular file.
func refuseBounded(t testing.TB, tc boundedCase, base string) {
	t.Helper()
	run, ck := saveRun(t, filepath.Join(base, strings.NewReplacer("/", "-", ".", "-").Replace(tc.name)))
	check := func(what string, err error, path string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Errorf("%s: %s: got %v, want a refusal naming %s as not a regular file", tc.name, what, err, filepath.Base(path))
		}
	}
	if tc.file == "init" {
		path := filepath.Join(run, "init.safetensors")
		replaceWith(t, path, tc.kind)
		_, _, err := ReadWeights(path, nil, nil)
		check("ReadWeights", err, path)
		return
	}
	path := filepath.Join(ck, tc.file)
	replaceWith(t, path, tc.kind)
	_, err := Open(ck)
	check("Open", err, path)
	_, err = ReadConfig(ck, nil)
	check("ReadConfig", err, path)
	_, _, err = ReadWeights(run, nil, nil)
	check("ReadWeights of the run", err, path)
	if tc.file == ManifestName {
		// Listing takes it for an unreadable checkpoint, then names it.
		_, err = Latest(filepath.Join(run, CheckpointsDir))
		check("Latest", err, path)
	}
}

func TestBoundedReadsRefuse(t *testing.T) {
	run, ck := saveRun(t, t.TempDir())
	if _, err := Open(ck); err != nil {
		t.Fatalf("the good checkpoint: %v", err)
	}
	if f, from, err := ReadWeights(run, nil, nil); err != nil || from != ck || len(f.Tensors) == 0 {
		t.Fatalf("ReadWeights of the run: %v, %s", err, from)
	}
	base := t.TempDir()
	for _, tc := range boundedCases() {
		refuseBounded(t, tc, base)
	}
}

// TestBoundedReadsMemory runs every case of TestBoundedReadsRefuse in a
// child process and holds its peak RSS under 100 MB: nothing is read from
// an endless file before it is refused. A child that hangs (a FIFO waiting
// for a writer) is killed and fails the test.
func TestBoundedReadsMemory(t *testing.T) {
	if dir := os.Getenv("MEMUNET_BOUNDED_CHILD"); dir != "" {
		for _, tc := range boundedCases() {
			refuseBounded(t, tc, dir)
		}
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBoundedReadsMemory$", "-test.v")
	cmd.Env = append(os.Environ(), "MEMUNET_BOUNDED_CHILD="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the child did not finish: a read blocked or ran on\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage on this system")
	}
	peak := ru.Maxrss * 1024 // kilobytes on Linux
	t.Logf("child peak RSS %s over %d cases", memory.FormatBytes(peak), len(boundedCases()))
	if peak >= 100<<20 {
		t.Errorf("child peak RSS %s, want under 100 MB", memory.FormatBytes(peak))
	}
	if !strings.Contains(out.String(), "PASS") {
		t.Errorf("child did not pass:\n%s", out.String())
	}
}
