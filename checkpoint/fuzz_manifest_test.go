package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenManifest: a run checkpoint whose manifest.json is anything (its
// .sha256 made to match, so the parser and every check behind it are
// reached) beside a real model and optimizer file is opened or refused,
// never a panic (TestBoundedReadsMemory holds the reads to their bounds).
func FuzzOpenManifest(f *testing.F) {
	run := f.TempDir()
	_, ck := saveRun(f, run)
	seed, err := os.ReadFile(filepath.Join(ck, ManifestName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"format":"memunet-checkpoint","format_version":1,"files":{"model.safetensors":{"bytes":1e18}}}`))
	f.Add([]byte(`{"format":"memunet-checkpoint","format_version":1,"files":{"../x":{"bytes":1}}}`))
	f.Add([]byte(`{"config":{"model":{"base":1e9}}}`))
	files := map[string][]byte{}
	for _, name := range []string{ModelFile, OptimizerFile} {
		b, err := os.ReadFile(filepath.Join(ck, name))
		if err != nil {
			f.Fatal(err)
		}
		files[name] = b
	}
	f.Fuzz(func(t *testing.T, man []byte) {
		dir := filepath.Join(t.TempDir(), Name(1, 1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		sum := sha256.Sum256(man)
		if err := os.WriteFile(filepath.Join(dir, ManifestName), man, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ManifestSumName), []byte(hex.EncodeToString(sum[:])+"  "+ManifestName+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if ck, err := Open(dir); err == nil && ck == nil {
			t.Fatal("Open returned neither a checkpoint nor an error")
		}
	})
}
