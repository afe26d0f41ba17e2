package cudnn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// CacheEnv names the folder of Find's cache files (FindCachePath); "off"
// turns the cache off. Unset: memunet/cudnn-find in the user's cache
// folder ($XDG_CACHE_HOME, else ~/.cache).
const CacheEnv = "MEMUNET_CUDNN_CACHE"

// FindCache keeps cuDNN's Find results on disk for one GPU and cuDNN, so
// that every process on a machine chooses from the same times: a plan
// and the run after it, compare's variants, a resumed run, and two runs of
// one seed. Find's times vary from call to call, and two deterministic
// algorithms give different bits, so without it two runs could train with
// different algorithms; and each process would pay for Find again.
//
// The file is JSON (findFile), rewritten whole through a rename after each
// Put, merged with what another process wrote meanwhile. A file that does
// not parse is started afresh; the cache never stops a run (Put's error
// is for the caller to note).
type FindCache struct {
	path          string
	device, cudnn string
	mu            sync.Mutex
	entries       map[string]findEntry
}

// findFile is a cache file: what it was measured on, and its entries.
type findFile struct {
	Note    string      `json:"note"`
	Device  string      `json:"device"`
	CUDNN   string      `json:"cudnn"`
	Entries []findEntry `json:"entries"`
}

// findEntry is one pass of one convolution at one precision.
type findEntry struct {
	Precision string   `json:"precision"`
	Pass      Pass     `json:"pass"`
	Shape     Shape    `json:"shape"`
	Results   []Result `json:"results"`
}

func (e findEntry) key() string { return cacheKey(e.Pass, e.Shape, e.Precision) }

func cacheKey(pass Pass, s Shape, precision string) string {
	pads, strides := make([]int, len(s.Input)-2), make([]int, len(s.Input)-2)
	for i := range pads {
		pads[i], strides[i] = s.PadAt(i), s.StrideAt(i)
	}
	return fmt.Sprintf("%s %s %v %v %v %v", precision, pass, s.Input, s.Filter, pads, strides)
}

// FindCachePath is the cache file for device (the GPU as the backend
// describes it) and cuDNN library cudnn, in CacheEnv's folder; "" where
// the cache is off or there is no cache folder.
func FindCachePath(getenv func(string) string, device, cudnn string) string {
	dir := getenv(CacheEnv)
	switch {
	case dir == "off":
		return ""
	case dir == "":
		base := getenv("XDG_CACHE_HOME")
		if base == "" {
			home := getenv("HOME")
			if home == "" {
				return ""
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "memunet", "cudnn-find")
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, device+"_"+cudnn)
	return filepath.Join(dir, name+".json")
}

// OpenFindCache reads the cache at path for device and cudnn (an empty
// one where the file is missing or does not parse, or was written for
// another device or library). A nil cache (path "") keeps nothing.
func OpenFindCache(path, device, cudnn string) *FindCache {
	if path == "" {
		return nil
	}
	c := &FindCache{path: path, device: device, cudnn: cudnn, entries: map[string]findEntry{}}
	c.merge()
	return c
}

// merge adds the file's entries the cache lacks (c.mu held or not shared).
func (c *FindCache) merge() {
	b, err := os.ReadFile(c.path)
	if err != nil {
		return
	}
	var f findFile
	if json.Unmarshal(b, &f) != nil || f.Device != c.device || f.CUDNN != c.cudnn {
		return
	}
	for _, e := range f.Entries {
		if _, ok := c.entries[e.key()]; !ok && len(e.Results) > 0 {
			c.entries[e.key()] = e
		}
	}
}

// Path is the cache's file ("" for a nil cache).
func (c *FindCache) Path() string {
	if c == nil {
		return ""
	}
	return c.path
}

// Get is what Find gave for pass of s at precision, if the cache has it.
func (c *FindCache) Get(pass Pass, s Shape, precision string) ([]Result, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[cacheKey(pass, s, precision)]
	return e.Results, ok
}

// settled reports whether every row of a Find either ran or cannot run
// on this GPU at all (CUDNN_STATUS_NOT_SUPPORTED: 9 in cuDNN 8, the 3000s
// in cuDNN 9): a row that failed otherwise (its workspace could not be
// allocated while the pool held the memory, say) may run another time.
func settled(rs []Result) bool {
	for _, r := range rs {
		if r.Status != 0 && r.Status != 9 && (r.Status < 3000 || r.Status >= 4000) {
			return false
		}
	}
	return true
}

// Put records Find's results for pass of s at precision and rewrites the
// file with them and whatever another process added meanwhile; results
// that are not settled are left out, so that the next process measures
// again.
func (c *FindCache) Put(pass Pass, s Shape, precision string, rs []Result) error {
	if c == nil || len(rs) == 0 || !settled(rs) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := findEntry{Precision: precision, Pass: pass, Shape: s, Results: rs}
	c.entries[e.key()] = e
	c.merge()
	f := findFile{Note: "cuDNN's Find results, kept by memunet so that every run on this GPU and cuDNN chooses the same algorithms; delete the file to measure again",
		Device: c.device, CUDNN: c.cudnn}
	for _, e := range c.entries {
		f.Entries = append(f.Entries, e)
	}
	// By key, so the file reads the same whatever order they were found in.
	slices.SortFunc(f.Entries, func(a, b findEntry) int { return strings.Compare(a.key(), b.key()) })
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return fmt.Errorf("cuDNN's Find cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".find-*.json")
	if err != nil {
		return fmt.Errorf("cuDNN's Find cache: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cuDNN's Find cache: writing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cuDNN's Find cache: %w", err)
	}
	return nil
}
