//go:build gpu

package cudnn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// entryNames are the entry points cudnnapi.h declares (MC_ENTRIES).
func entryNames(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("cudnnapi.h")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`X\([^,()]+,\s*(cudnn\w+),`).FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	if len(names) < 20 {
		t.Fatalf("found %d entry points in cudnnapi.h: %v", len(names), names)
	}
	return names
}

// stub builds, with gcc, a shared library at path that exports the entry
// points cudnnapi.h declares but those in omit: cudnnGetVersion returns
// version, cudnnGetCudartVersion 12060, cudnnCreate
// CUDNN_STATUS_NOT_INITIALIZED (1001, as a cuDNN 9 without a usable GPU),
// cudnnGetErrorString a status's name, and the rest 0. It skips the test
// where gcc is absent.
func stub(t *testing.T, path string, version int, omit ...string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the stub libraries with")
	}
	var src strings.Builder
	src.WriteString("#include <stddef.h>\n")
	special := map[string]string{
		"cudnnGetVersion":       fmt.Sprintf("size_t cudnnGetVersion(void) { return %d; }\n", version),
		"cudnnGetCudartVersion": "size_t cudnnGetCudartVersion(void) { return 12060; }\n",
		"cudnnGetErrorString":   "const char *cudnnGetErrorString(unsigned int s) { return s == 1001 ? \"CUDNN_STATUS_NOT_INITIALIZED\" : \"CUDNN_STATUS_OTHER\"; }\n",
		"cudnnCreate":           "unsigned int cudnnCreate(void **h) { *h = 0; return 1001; }\n",
	}
	for _, name := range entryNames(t) {
		switch {
		case strings.Contains(" "+strings.Join(omit, " ")+" ", " "+name+" "):
		case special[name] != "":
			src.WriteString(special[name])
		default:
			fmt.Fprintf(&src, "unsigned int %s(void) { return 0; }\n", name)
		}
	}
	c := filepath.Join(t.TempDir(), "stub.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", path, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return path
}

// only is MEMUNET_CUDNN=path as the whole environment.
func only(path string) func(string) string { return env(map[string]string{EnvPath: path}) }

func wantLoadError(t *testing.T, err error, sentinel error, words ...string) {
	t.Helper()
	var le *LoadError
	if !errors.As(err, &le) || !errors.Is(err, sentinel) {
		t.Fatalf("error %v (%T): want a *LoadError wrapping %v", err, err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestLoadMissingFile: MEMUNET_CUDNN naming no file is ErrNotFound naming
// the variable and the file, and nothing else is tried.
func TestLoadMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcudnn.so.9")
	_, err := open(only(missing))
	wantLoadError(t, err, ErrNotFound, missing, EnvPath, "no such file", "unset "+EnvPath, "Fix: install cuDNN")
	if n := len(err.(*LoadError).Tried); n != 1 {
		t.Errorf("tried %d places with %s set, want 1", n, EnvPath)
	}
	notLib := filepath.Join(t.TempDir(), "libcudnn.so.9")
	if err := os.WriteFile(notLib, []byte("not a library\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = open(only(notLib))
	wantLoadError(t, err, ErrNotFound, notLib, EnvPath)
}

// TestLoadWithoutSymbols: a library that opens but lacks entry points is
// ErrNotCUDNN naming the missing ones.
func TestLoadWithoutSymbols(t *testing.T) {
	names := entryNames(t)
	lib := stub(t, filepath.Join(t.TempDir(), "libcudnn.so.9"), 90600, names[3:]...) // version, cudart, error string only
	_, err := open(only(lib))
	wantLoadError(t, err, ErrNotCUDNN, lib, "lacks", "cudnnCreate", "cudnnConvolutionForward", "cudnnFindConvolutionBackwardFilterAlgorithmEx")
	lib = stub(t, filepath.Join(t.TempDir(), "libcudnn.so.9"), 90600, "cudnnConvolutionBackwardFilter")
	_, err = open(only(lib))
	wantLoadError(t, err, ErrNotCUDNN, "lacks cudnnConvolutionBackwardFilter")
}

// TestLoadTooOld: a library with every entry point whose cudnnGetVersion
// is older than MinVersion is ErrTooOld naming both versions.
func TestLoadTooOld(t *testing.T) {
	lib := stub(t, filepath.Join(t.TempDir(), "libcudnn.so.7"), 7605)
	_, err := open(only(lib))
	wantLoadError(t, err, ErrTooOld, lib, "cuDNN 7.6.5", "older than 8.0.0")
}

// TestLoadNewEnough: a library with every entry point and a version of at
// least MinVersion loads, with its file, version and CUDA version; a
// handle on a machine without a driver is ErrNoDriver (with one, the
// stub's cudnnCreate status).
func TestLoadNewEnough(t *testing.T) {
	for _, v := range []struct {
		raw  int
		want string
	}{{8000, "8.0.0"}, {90600, "9.6.0"}} {
		path := stub(t, filepath.Join(t.TempDir(), "libcudnn.so"), v.raw)
		l, err := open(only(path))
		if err != nil {
			t.Fatalf("cuDNN %s: %v", v.want, err)
		}
		if l.Path != path || l.From != EnvPath || l.Version.String() != v.want || l.CUDA != "12.6" {
			t.Errorf("loaded %+v: want %s, cuDNN %s, CUDA 12.6, from %s", l, path, v.want, EnvPath)
		}
		if s := l.String(); s != "cuDNN "+v.want+" (CUDA 12.6) from "+path {
			t.Errorf("String() = %q", s)
		}
		_, err = l.NewHandle()
		if err == nil {
			t.Fatal("the stub's cudnnCreate fails, NewHandle did not")
		}
		if _, ok := driverState(); ok {
			var e *Error
			if !errors.As(err, &e) || e.Status != 1001 || e.Text != "CUDNN_STATUS_NOT_INITIALIZED" || errors.Is(err, ErrNoDriver) {
				t.Errorf("NewHandle with a driver: %v; want cudnnCreate's status 1001 by name", err)
			}
			continue
		}
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("NewHandle without a driver: %v; want ErrNoDriver", err)
		}
		for _, w := range []string{path, "cuDNN " + v.want, "cudnnCreate: CUDNN_STATUS_NOT_INITIALIZED", "cuda.conv: memunet", "nvidia-smi"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("NewHandle's error %q does not say %q", err, w)
			}
		}
	}
}

// TestLoadFromWheel: without MEMUNET_CUDNN and with no cuDNN on the loader
// path, the loader takes a PyTorch wheel's copy in a site-packages folder,
// going past a .so.9 there that is too old to its .so.8.
func TestLoadFromWheel(t *testing.T) {
	for _, p := range placeGroups(env(nil))[0]() {
		if l, _ := try(p); l != nil {
			t.Skipf("%s is on the loader path and comes first", l)
		}
	}
	prefix, dir := fakeVenv(t)
	old := stub(t, filepath.Join(dir, "libcudnn.so.9"), 7605)
	good := stub(t, filepath.Join(dir, "libcudnn.so.8"), 8907)
	l, err := open(env(map[string]string{"VIRTUAL_ENV": prefix}))
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != good || l.Version.String() != "8.9.7" || !strings.Contains(l.From, "PyTorch wheel") {
		t.Errorf("loaded %s from %q; want %s (cuDNN 8.9.7) from a PyTorch wheel, after refusing %s", l, l.From, good, old)
	}
}
