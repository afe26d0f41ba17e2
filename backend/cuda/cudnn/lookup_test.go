package cudnn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		raw  int
		want Version
	}{
		{7605, Version{7, 6, 5}}, {8000, Version{8, 0, 0}}, {8907, Version{8, 9, 7}},
		{90000, Version{9, 0, 0}}, {90600, Version{9, 6, 0}}, {91002, Version{9, 10, 2}},
	} {
		if got := ParseVersion(tc.raw); got != tc.want {
			t.Errorf("ParseVersion(%d) = %v, want %v", tc.raw, got, tc.want)
		}
	}
	if !(Version{7, 6, 5}).Less(MinVersion) || (Version{8, 0, 0}).Less(MinVersion) || !(Version{8, 9, 7}).Less(Version{9, 0, 0}) {
		t.Error("Less orders versions wrongly")
	}
	if got := CUDAVersion(12060); got != "12.6" {
		t.Errorf("CUDAVersion(12060) = %s", got)
	}
}

// fakeVenv makes a virtual environment's site-packages with a PyTorch
// wheel's nvidia/cudnn/lib folder and returns the prefix and that folder.
func fakeVenv(t *testing.T) (prefix, lib string) {
	t.Helper()
	prefix = t.TempDir()
	lib = filepath.Join(prefix, "lib", "python3.11", "site-packages", "nvidia", "cudnn", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	return prefix, lib
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestPlacesOrder: MEMUNET_CUDNN alone where it is set; else libcudnn.so.9
// then .8 on the loader path, then each site-packages folder's wheel copy,
// .9 before .8 (a virtual environment's folder among them).
func TestPlacesOrder(t *testing.T) {
	got := Places(env(map[string]string{EnvPath: "/opt/x/libcudnn.so.9"}))
	if len(got) != 1 || got[0].Path != "/opt/x/libcudnn.so.9" || got[0].From != EnvPath {
		t.Errorf("with %s set: %v, want that file alone", EnvPath, got)
	}
	prefix, lib := fakeVenv(t)
	got = Places(env(map[string]string{"VIRTUAL_ENV": prefix}))
	if len(got) < 4 || got[0].Path != "libcudnn.so.9" || got[1].Path != "libcudnn.so.8" {
		t.Fatalf("places %v: want libcudnn.so.9 and .8 on the loader path first", got)
	}
	at := -1
	for i, p := range got {
		if p.Path == filepath.Join(lib, "libcudnn.so.9") {
			at = i
		}
	}
	if at < 2 || at+1 >= len(got) || got[at+1].Path != filepath.Join(lib, "libcudnn.so.8") || !strings.Contains(got[at].From, "PyTorch wheel") {
		t.Errorf("places %v: want the virtual environment's wheel copy, .9 then .8, after the loader path", got)
	}
}

// TestSitePackagesWithoutPython: with no python3 on PATH the folders
// still come from the usual prefixes, and nothing fails.
func TestSitePackagesWithoutPython(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	prefix, _ := fakeVenv(t)
	want := filepath.Join(prefix, "lib", "python3.11", "site-packages")
	found := false
	for _, d := range SitePackages(env(map[string]string{"VIRTUAL_ENV": prefix})) {
		found = found || d == want
	}
	if !found {
		t.Errorf("SitePackages without python3 misses %s", want)
	}
}

// TestLoadErrorWords: the error names every place tried with its reason,
// the cause, and the fix.
func TestLoadErrorWords(t *testing.T) {
	tried := []Attempt{
		{Place: Place{"libcudnn.so.9", "the loader path"}, Why: "libcudnn.so.9: cannot open shared object file", Err: ErrNotFound},
		{Place: Place{"/w/nvidia/cudnn/lib/libcudnn.so.8", "a PyTorch wheel's cuDNN"}, Opened: true, Why: "/w/nvidia/cudnn/lib/libcudnn.so.8 is cuDNN 7.6.5, older than 8.0.0", Err: ErrTooOld},
	}
	err := newLoadError(tried)
	if !errors.Is(err, ErrTooOld) {
		t.Errorf("%v: want ErrTooOld, the refusal of the library that opened", err)
	}
	for _, w := range []string{"older than 8.0", "libcudnn.so.9 (the loader path): libcudnn.so.9: cannot open",
		"/w/nvidia/cudnn/lib/libcudnn.so.8 (a PyTorch wheel's cuDNN)", "7.6.5", "Fix: install cuDNN 9", EnvPath} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "unset") {
		t.Errorf("error %q says to unset %s, which was not set", err, EnvPath)
	}
	err = newLoadError([]Attempt{{Place: Place{"/x.so", EnvPath}, Why: "no such file", Err: ErrNotFound}})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "unset "+EnvPath) {
		t.Errorf("%v: want ErrNotFound and the hint to unset %s", err, EnvPath)
	}
}
