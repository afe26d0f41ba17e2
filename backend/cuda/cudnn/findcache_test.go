package cudnn

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestFindCachePath: the folder is MEMUNET_CUDNN_CACHE's, else the user's
// cache folder's; off turns the cache off; the file is named for the
// device and library, in letters, digits, '.', '-' and '_' only.
func TestFindCachePath(t *testing.T) {
	const dev, lib = "NVIDIA H100 80GB HBM3 (compute 9.0)", "cuDNN 9.6.0 (CUDA 12.6) from /usr/lib/libcudnn.so.9"
	for _, c := range []struct {
		env  map[string]string
		want string // the folder; "" for no cache
	}{
		{map[string]string{CacheEnv: "/tmp/x"}, "/tmp/x"},
		{map[string]string{CacheEnv: "off", "HOME": "/home/u"}, ""},
		{map[string]string{"XDG_CACHE_HOME": "/c", "HOME": "/home/u"}, "/c/memunet/cudnn-find"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.cache/memunet/cudnn-find"},
		{map[string]string{}, ""},
	} {
		got := FindCachePath(env(c.env), dev, lib)
		if c.want == "" {
			if got != "" {
				t.Errorf("%v: %q, want no cache", c.env, got)
			}
			continue
		}
		name := filepath.Base(got)
		if filepath.Dir(got) != c.want || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" ||
			!strings.Contains(name, "H100") || !strings.Contains(name, "9.6.0") {
			t.Errorf("%v: %q, want a file named for the device and library in %s", c.env, got, c.want)
		}
	}
}

// TestFindCacheAcrossProcesses: what one cache (one process) puts, a
// cache opened later on the same file gets; two that put different
// entries leave the file with both; a file for another device or library,
// or one that does not parse, is an empty cache, rewritten at the next
// Put; a nil cache keeps nothing.
func TestFindCacheAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "gpu.json")
	s1 := Shape{Input: []int{4, 64, 256, 256}, Filter: []int{64, 64, 3, 3}, Pad: 1, Stride: 1}
	s2 := Shape{Input: []int{4, 64, 512, 512}, Filter: []int{128, 64, 2, 2}, Stride: 2}
	r1 := []Result{{Algo: 1, Name: "IMPLICIT_PRECOMP_GEMM", TimeMS: 0.4, WorkspaceBytes: 9216, Deterministic: true, MathType: 1}}
	r2 := []Result{{Algo: 5, Name: "WINOGRAD_NONFUSED", TimeMS: 0.2, Deterministic: true}}
	a, b := OpenFindCache(path, "gpu", "lib"), OpenFindCache(path, "gpu", "lib")
	if err := a.Put(Forward, s1, "tf32", r1); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(BackwardData, s2, "fp16", r2); err != nil {
		t.Fatal(err)
	}
	c := OpenFindCache(path, "gpu", "lib")
	if got, ok := c.Get(Forward, s1, "tf32"); !ok || !reflect.DeepEqual(got, r1) {
		t.Errorf("first entry: %v %v, want %v", got, ok, r1)
	}
	if got, ok := c.Get(BackwardData, s2, "fp16"); !ok || !reflect.DeepEqual(got, r2) {
		t.Errorf("second entry: %v %v, want %v", got, ok, r2)
	}
	for _, miss := range []struct {
		pass Pass
		s    Shape
		prec string
	}{{Forward, s1, "fp16"}, {BackwardData, s1, "tf32"}, {Forward, s2, "tf32"}} {
		if _, ok := c.Get(miss.pass, miss.s, miss.prec); ok {
			t.Errorf("%s %v %s: a hit for what nothing put", miss.pass, miss.s, miss.prec)
		}
	}
	if _, ok := OpenFindCache(path, "another gpu", "lib").Get(Forward, s1, "tf32"); ok {
		t.Error("another device's cache read this one's entries")
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := OpenFindCache(path, "gpu", "lib")
	if _, ok := d.Get(Forward, s1, "tf32"); ok {
		t.Error("a hit from a file that does not parse")
	}
	if err := d.Put(Forward, s1, "tf32", r1); err != nil {
		t.Fatal(err)
	}
	if got, ok := OpenFindCache(path, "gpu", "lib").Get(Forward, s1, "tf32"); !ok || !reflect.DeepEqual(got, r1) {
		t.Errorf("after rewriting a broken file: %v %v", got, ok)
	}
	// A row that failed for want of memory is not kept: the next process
	// measures again; one not supported on this GPU is.
	for _, c := range []struct {
		status int
		kept   bool
	}{{4001, false}, {2, false}, {3000, true}, {9, true}} {
		rows := append([]Result{{Algo: 2, Name: "GEMM", Status: c.status, TimeMS: -1}}, r1...)
		if err := d.Put(BackwardFilter, s1, "bf16", rows); err != nil {
			t.Fatal(err)
		}
		got, ok := OpenFindCache(path, "gpu", "lib").Get(BackwardFilter, s1, "bf16")
		if ok != c.kept || ok && !reflect.DeepEqual(got, rows) {
			t.Errorf("a row of status %d: kept %v (%v), want %v", c.status, ok, got, c.kept)
		}
	}
	var none *FindCache
	if err := none.Put(Forward, s1, "tf32", r1); err != nil || none.Path() != "" {
		t.Errorf("nil cache: %v, path %q", err, none.Path())
	}
	if _, ok := none.Get(Forward, s1, "tf32"); ok {
		t.Error("nil cache: a hit")
	}
}
