package configs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEmbeddedMatchDisk checks that every configs/*.yaml is embedded under
// its name, byte for byte, and nothing else is.
func TestEmbeddedMatchDisk(t *testing.T) {
	paths, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	names := Names()
	if len(paths) != len(names) || names[0] != Default {
		t.Fatalf("Names() = %v; files on disk: %v (want %q first)", names, paths, Default)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(p, ".yaml")
		if !slices.Contains(names, name) {
			t.Errorf("Names() = %v lacks %q", names, name)
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, arg := range []string{name, p} {
			got, err := Read(arg)
			if err != nil {
				t.Fatalf("Read(%q): %v", arg, err)
			}
			if string(got) != string(want) {
				t.Errorf("Read(%q) differs from %s", arg, p)
			}
		}
	}
}

func TestReadUnknown(t *testing.T) {
	for _, name := range []string{"nosuch", "", "../go.mod", "configs.go"} {
		_, err := Read(name)
		if err == nil || !strings.Contains(err.Error(), "quickstart, ") {
			t.Errorf("Read(%q): error %v, want one listing the names", name, err)
		}
	}
}

// TestDescriptions: each config's description (config list) is one whole
// sentence that says what the config is, not which file it is.
func TestDescriptions(t *testing.T) {
	for _, name := range Names() {
		d, err := Describe(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(d, ".") || strings.Count(d, ". ") > 0 || len(d) > 110 {
			t.Errorf("%s: description %q is not one sentence of at most 110 characters", name, d)
		}
		if strings.Contains(d, name+".yaml") || strings.Contains(d, "configs/") {
			t.Errorf("%s: description %q names a file", name, d)
		}
	}
}
