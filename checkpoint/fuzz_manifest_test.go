package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/memunet/memunet/runfiles"
)

// FuzzOpenManifest: a run checkpoint whose manifest.json is anything (its
// .sha256 made to match, so the parser and every check behind it are
// reached) beside a real model and optimizer file is opened or refused,
// never a panic (TestBoundedReadsMemory holds the reads to their bounds);
// and a manifest opened holds every step, epoch and count from 0 to
// MaxCount (countsOf finds them by reflection, so a field added later is
// held to it too), so that no hint's sum or doubling overflows.
func FuzzOpenManifest(f *testing.F) {
	run := f.TempDir()
	_, ck := saveRun(f, run)
	seed, err := os.ReadFile(filepath.Join(ck, runfiles.Manifest))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"format":"memunet-checkpoint","format_version":1,"files":{"model.safetensors":{"bytes":1e18}}}`))
	f.Add([]byte(`{"format":"memunet-checkpoint","format_version":1,"files":{"../x":{"bytes":1}}}`))
	f.Add([]byte(`{"config":{"model":{"base":1e9}}}`))
	for _, forged := range []string{`"step":4611686018427387904,`, `"step":-5,`} { // the issue's
		f.Add(bytes.Replace(seed, []byte(`"step":1,`), []byte(forged), 1))
	}
	files := map[string][]byte{}
	for _, name := range []string{runfiles.Model, runfiles.Optimizer} {
		b, err := os.ReadFile(filepath.Join(ck, name))
		if err != nil {
			f.Fatal(err)
		}
		files[name] = b
	}
	f.Fuzz(func(t *testing.T, man []byte) {
		dir := filepath.Join(t.TempDir(), runfiles.CheckpointName(1, 1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		sum := sha256.Sum256(man)
		if err := os.WriteFile(filepath.Join(dir, runfiles.Manifest), man, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, runfiles.ManifestSum), []byte(hex.EncodeToString(sum[:])+"  "+runfiles.Manifest+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ck, err := Open(dir)
		if err != nil {
			return
		}
		if ck == nil {
			t.Fatal("Open returned neither a checkpoint nor an error")
		}
		counts := map[string]int64{}
		countsOf(reflect.ValueOf(ck.Manifest), "", counts)
		for path, v := range counts {
			if v < 0 || v > MaxCount {
				t.Fatalf("opened a manifest whose %s is %d, outside 0 to %d", path, v, int64(MaxCount))
			}
		}
	})
}

// countsOf adds to out every signed integer in v by its JSON path, but
// maps (the configuration, the files), embedded structs (a validation's
// metrics) and those that are not the run's steps, epochs or counts:
// settings copied from the configuration, the data's description, mask
// values.
func countsOf(v reflect.Value, path string, out map[string]int64) {
	switch path {
	case "format_version", "scaler.growth_interval", "mask_values", "data":
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			countsOf(v.Elem(), path, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if sf.Anonymous || !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if path != "" {
				name = path + "." + name
			}
			countsOf(v.Field(i), name, out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			countsOf(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		out[path] = v.Int()
	}
}
