package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/internal/childtest"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/runfiles"
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

// tinyModel is tinyConfig's model, freed when the test ends.
func tinyModel(t testing.TB) *model.UNet {
	t.Helper()
	cfg := tinyConfig()
	net, err := model.New(model.NewDevice(cpu.New(), memory.Options{}), cfg.ModelConfig(), cfg.Model.Seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.Free)
	return net
}

// refuseSparseUnbounded plants in a plain checkpoint directory (no
// configuration bounds its files) a sparse file of 256 MiB under a
// manifest that gives its size and a wrong SHA-256: OpenDir hashes it
// streaming and refuses it as corrupt without holding it.
func refuseSparseUnbounded(t testing.TB, base string) {
	t.Helper()
	dir, err := Save(filepath.Join(base, "plain"), runfiles.CheckpointName(1, 1), testParts(map[string]string{"a.bin": "a"}), testManifest)
	if err != nil {
		t.Fatal(err)
	}
	plantSparse(t, dir, "b.bin", 256<<20, strings.Repeat("0", 64))
	if _, err := OpenDir(dir); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "b.bin is corrupt: its SHA-256 is") {
		t.Errorf("a sparse file under a lying manifest: got %v, want b.bin refused as corrupt", err)
	}
}

// saveRunClaiming is saveRun with claimed as the manifest's configuration
// (the tensors stay tinyConfig's).
func saveRunClaiming(t testing.TB, run string, claimed config.Config) (string, string) {
	t.Helper()
	net := tinyModel(t)
	cm, err := ConfigMap(claimed)
	if err != nil {
		t.Fatal(err)
	}
	writeTensors := func(ts []safetensors.Tensor) func(io.Writer) error {
		return func(w io.Writer) error { return safetensors.Write(w, ts, nil) }
	}
	parts := []Part{
		{Name: runfiles.Model, Write: writeTensors(StateDict(net))},
		{Name: runfiles.Optimizer, Write: writeTensors(nil)},
	}
	dir, err := Save(filepath.Join(run, runfiles.Checkpoints), runfiles.CheckpointName(1, 1), parts, func(sums map[string]Sum) ([]byte, error) {
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
	for _, file := range []string{runfiles.Manifest, runfiles.ManifestSum, runfiles.Model, "init"} {
		for _, kind := range []string{"fifo", "zero"} {
			out = append(out, boundedCase{name: file + "/" + kind, file: file, kind: kind})
		}
	}
	for _, file := range []string{runfiles.Model, runfiles.Optimizer} {
		out = append(out, boundedCase{name: file + "/sparse", file: file, kind: "sparse"})
	}
	return out
}

// sparseBytes is the apparent size of the sparse files planted: reading
// one whole took 2.1 GB.
const sparseBytes = 2 << 30

// plantSparse replaces the data file name of the checkpoint dir by a
// sparse file of size bytes (a few KiB on disk) and rewrites the manifest
// (and its checksum, so that it verifies) to give it that size and sha.
func plantSparse(t testing.TB, dir, name string, size int64, sha string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("not zeros"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	var man map[string]json.RawMessage
	b, err := os.ReadFile(filepath.Join(dir, runfiles.Manifest))
	if err == nil {
		err = json.Unmarshal(b, &man)
	}
	var files map[string]Sum
	if err == nil {
		err = json.Unmarshal(man["files"], &files)
	}
	if err != nil {
		t.Fatal(err)
	}
	files[name] = Sum{Bytes: size, SHA256: sha}
	if man["files"], err = json.Marshal(files); err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(man); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if err := os.WriteFile(filepath.Join(dir, runfiles.Manifest), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runfiles.ManifestSum), []byte(hex.EncodeToString(sum[:])+"  "+runfiles.Manifest+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
	if tc.kind == "sparse" {
		// A manifest that lies about a sparse file: held to what the
		// checkpoint's own configuration needs before a byte is read.
		most := RunFileBounds(ModelSpecs(tinyModel(t)))[tc.file]
		plantSparse(t, ck, tc.file, sparseBytes, strings.Repeat("0", 64))
		want := fmt.Sprintf("%s: %s gives it %d bytes, more than the %d the checkpoint's configuration needs at most", tc.file, runfiles.Manifest, int64(sparseBytes), most)
		check = func(what string, err error, path string) {
			t.Helper()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %s: got %v, want a refusal saying %q", tc.name, what, err, want)
			}
		}
	} else {
		replaceWith(t, path, tc.kind)
	}
	_, err := Open(ck)
	check("Open", err, path)
	_, err = ReadConfig(ck, nil)
	check("ReadConfig", err, path)
	_, _, err = ReadWeights(run, nil, nil)
	check("ReadWeights of the run", err, path)
	if tc.file == runfiles.Manifest {
		// Listing takes it for an unreadable checkpoint, then names it.
		_, err = Latest(filepath.Join(run, runfiles.Checkpoints))
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
	refuseSparseUnbounded(t, base)
}

// TestBoundedReadsMemory runs every case of TestBoundedReadsRefuse in a
// child process and holds its peak RSS under 100 MB: nothing is read from
// an endless file before it is refused, and a manifest that gives a sparse
// file gigabytes makes nothing allocate them. A child that hangs (a FIFO waiting
// for a writer) is killed and fails the test.
func TestBoundedReadsMemory(t *testing.T) {
	if dir := os.Getenv("MEMUNET_BOUNDED_CHILD"); dir != "" {
		defer childtest.ReportPeak(t)
		for _, tc := range boundedCases() {
			refuseBounded(t, tc, dir)
		}
		refuseSparseUnbounded(t, dir)
		return
	}
	_, peak := childtest.PeakRSS(t, "TestBoundedReadsMemory", "MEMUNET_BOUNDED_CHILD", t.TempDir(), 2*time.Minute)
	t.Logf("child peak RSS %s over %d cases", memory.FormatBytes(peak), len(boundedCases()))
	if peak >= 100<<20 {
		t.Errorf("child peak RSS %s, want under 100 MB", memory.FormatBytes(peak))
	}
}
