package cudnn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// EnvPath is the environment variable that names a cuDNN library file
// (e.g. /opt/cudnn/lib/libcudnn.so.9). Where it is set, that file is the
// only place the loader tries: an explicit choice is never replaced by
// another library behind the user's back.
const EnvPath = "MEMUNET_CUDNN"

// MinVersion is the oldest cuDNN the loader accepts: 8.0 is the first
// with Ampere (compute capability 8.0, the oldest memunet's CUDA backend
// runs on) and with CUDNN_FMA_MATH, which exact fp32 convolutions
// (cuda.tf32: false) need; every entry point cudnnapi.h declares exists
// from 8.0 through 9.x.
var MinVersion = Version{8, 0, 0}

// MinBF16Version is the oldest cuDNN with bf16 convolutions
// (CUDNN_DATA_BFLOAT16 came in 8.1): an older one refuses a bf16 shape,
// which memunet's kernels then compute under cuda.conv auto.
var MinBF16Version = Version{8, 1, 0}

// Version is a cuDNN version, major.minor.patch.
type Version struct{ Major, Minor, Patch int }

// ParseVersion decodes cudnnGetVersion's number: major*1000 + minor*100 +
// patch up to cuDNN 8 (8907 is 8.9.7), major*10000 + minor*100 + patch
// from cuDNN 9 on (90600 is 9.6.0).
func ParseVersion(v int) Version {
	if v >= 90000 {
		return Version{v / 10000, v % 10000 / 100, v % 100}
	}
	return Version{v / 1000, v % 1000 / 100, v % 100}
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less orders versions.
func (v Version) Less(o Version) bool {
	return slices.Compare([]int{v.Major, v.Minor, v.Patch}, []int{o.Major, o.Minor, o.Patch}) < 0
}

// CUDAVersion formats cudnnGetCudartVersion's number (12060 is 12.6), the
// CUDA runtime the library was built for.
func CUDAVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// Place is somewhere the loader looks for cuDNN.
type Place struct {
	// Path is what the dynamic loader is given: a file, or a library name
	// it searches for on the loader path (LD_LIBRARY_PATH, ld.so.cache,
	// the system folders).
	Path string
	// From says how the place was found, for messages.
	From string
}

func (p Place) String() string { return p.Path + " (" + p.From + ")" }

// Places is where the loader looks, in order: the file EnvPath names
// where it is set (and nothing else then); else libcudnn.so.9 and
// libcudnn.so.8 on the loader path, then the copies PyTorch's wheels
// install, site-packages/nvidia/cudnn/lib/libcudnn.so.9 and .8, in every
// Python site-packages folder found (SitePackages). getenv reads the
// environment (os.Getenv).
func Places(getenv func(string) string) []Place {
	var all []Place
	for _, g := range placeGroups(getenv) {
		all = append(all, g()...)
	}
	return all
}

// placeGroups is Places in groups, each computed only when the loader
// reaches it: the wheels' folders are looked for (python3 asked) only
// where the loader path has no usable cuDNN.
func placeGroups(getenv func(string) string) []func() []Place {
	if p := getenv(EnvPath); p != "" {
		return []func() []Place{func() []Place { return []Place{{Path: p, From: EnvPath}} }}
	}
	return []func() []Place{
		func() []Place {
			return []Place{{"libcudnn.so.9", "the loader path"}, {"libcudnn.so.8", "the loader path"}}
		},
		func() []Place {
			var places []Place
			for _, dir := range SitePackages(getenv) {
				for _, so := range []string{"libcudnn.so.9", "libcudnn.so.8"} {
					places = append(places, Place{filepath.Join(dir, "nvidia", "cudnn", "lib", so), "a PyTorch wheel's cuDNN"})
				}
			}
			return places
		},
	}
}

// sitePrefixes are the usual Python prefixes whose site-packages the
// loader looks in without asking Python: a virtual environment's, a conda
// environment's, the user's, the system's.
func sitePrefixes(getenv func(string) string) []string {
	var globs []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := getenv(env); p != "" {
			globs = append(globs, filepath.Join(p, "lib", "python3*", "site-packages"))
		}
	}
	if home := getenv("HOME"); home != "" {
		globs = append(globs, filepath.Join(home, ".local", "lib", "python3*", "site-packages"))
	}
	return append(globs,
		"/usr/local/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
		"/usr/lib/python3*/site-packages", "/usr/lib/python3/dist-packages",
		"/opt/conda/lib/python3*/site-packages")
}

// pythonSites is the command that prints python3's site-packages folders,
// one a line (site.getsitepackages is missing in some old virtualenvs).
const pythonSites = "import site\n" +
	"d = list(getattr(site, 'getsitepackages', lambda: [])())\n" +
	"u = getattr(site, 'getusersitepackages', lambda: '')()\n" +
	"print('\\n'.join(d + [u]))\n"

// SitePackages is the Python site-packages folders that exist here: those
// python3 reports where python3 is on PATH (given 5 seconds; a python3
// that fails or is absent adds none), then those under the usual prefixes
// (sitePrefixes), each once.
func SitePackages(getenv func(string) string) []string {
	var dirs []string
	if py, err := exec.LookPath("python3"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := exec.CommandContext(ctx, py, "-c", pythonSites).Output()
		cancel()
		if err == nil {
			dirs = append(dirs, strings.Split(strings.TrimSpace(string(out)), "\n")...)
		}
	}
	for _, g := range sitePrefixes(getenv) {
		m, _ := filepath.Glob(g)
		slices.Sort(m)
		dirs = append(dirs, m...)
	}
	var found []string
	for _, d := range dirs {
		d = strings.TrimSpace(d)
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		if st, err := os.Stat(d); err != nil || !st.IsDir() || slices.Contains(found, d) {
			continue
		}
		found = append(found, d)
	}
	return found
}

// Why a place gave no usable library: LoadError's Err is one of these.
var (
	// ErrNotFound: no place had a library that opens.
	ErrNotFound = errors.New("no cuDNN library found")
	// ErrNotCUDNN: a library opened but lacks entry points memunet calls
	// (not cuDNN, or a cuDNN without the legacy convolution API).
	ErrNotCUDNN = errors.New("the library lacks cuDNN's convolution entry points")
	// ErrTooOld: a cuDNN older than MinVersion.
	ErrTooOld = errors.New("cuDNN is older than memunet supports")
	// ErrNoDriver: cuDNN loaded but cannot start: no NVIDIA driver or GPU
	// on this machine.
	ErrNoDriver = errors.New("cuDNN cannot start here: no NVIDIA driver or GPU")
)

// Attempt is a place tried, and why it gave no usable library.
type Attempt struct {
	Place
	// Opened is set where the library opened (and was then refused).
	Opened bool
	Why    string
	// Err is ErrNotFound, ErrNotCUDNN or ErrTooOld.
	Err error
}

// LoadError is the loader's failure: every place tried, and why each gave
// no usable library. Err is the first refusal of a library that opened
// (ErrNotCUDNN, ErrTooOld), else ErrNotFound.
type LoadError struct {
	Tried []Attempt
	Err   error
}

func (e *LoadError) Unwrap() error { return e.Err }

func (e *LoadError) Error() string {
	var b strings.Builder
	switch e.Err {
	case ErrNotCUDNN:
		b.WriteString("no usable cuDNN: a library found lacks entry points memunet calls (cuDNN's legacy convolution API, in cuDNN 8.0 through 9.x)")
	case ErrTooOld:
		fmt.Fprintf(&b, "no usable cuDNN: the cuDNN found is older than %d.%d, the oldest memunet supports (the first with Ampere GPUs and FMA math)",
			MinVersion.Major, MinVersion.Minor)
	default:
		b.WriteString("no cuDNN library found")
	}
	b.WriteString("; tried: ")
	for i, a := range e.Tried {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", a.Place, a.Why)
	}
	if len(e.Tried) == 0 {
		b.WriteString("nothing")
	}
	b.WriteString(". Fix: install cuDNN 9 (NVIDIA's libcudnn9 package for your CUDA major version, or the nvidia-cudnn-cu12 wheel that PyTorch installs), or point " +
		EnvPath + " at a libcudnn.so.9 or libcudnn.so.8 file")
	if len(e.Tried) == 1 && e.Tried[0].From == EnvPath {
		b.WriteString(", or unset " + EnvPath + " to search the loader path and PyTorch's wheels")
	}
	return b.String()
}

// newLoadError picks Err from what was tried.
func newLoadError(tried []Attempt) *LoadError {
	e := &LoadError{Tried: tried, Err: ErrNotFound}
	for _, a := range tried {
		if a.Opened {
			e.Err = a.Err
			break
		}
	}
	return e
}
