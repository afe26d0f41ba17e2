package device

import (
	"errors"
	"fmt"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
)

// ConvResolver is a backend whose convolution provider config key
// cuda.conv chooses (the CUDA backend).
type ConvResolver interface {
	SetConvProvider(cuda.ConvProvider)
	ConvProvider() cuda.ConvProvider
	// OpenConvLibrary opens the library once, with the device's context
	// current; OnContext runs a library's call so.
	OpenConvLibrary(open func() (cuda.ConvLibrary, error)) (cuda.ConvLibrary, error)
	OnContext(f func() error) error
	// UseConvLibrary makes lib (nil: none) compute the convolutions,
	// each pass's algorithm chosen by policy.
	UseConvLibrary(lib cuda.ConvLibrary, policy cudnn.Policy, required bool)
	// ConvChoices lists the convolutions the library was asked for and
	// what it chose for each.
	ConvChoices() []cuda.LibraryChoice
}

// ResolveConv resolves cuda.conv (choice: auto, cudnn or memunet) on b and
// records it there: memunet loads nothing; cudnn loads cuDNN (cudnn.Load),
// opens a handle on b's device and makes it compute b's convolutions
// under policy (cuda.workspace, cuda.deterministic), or is an error that
// names the places tried and the fix; auto does what cudnn does where
// cuDNN loads and opens, and otherwise records why and leaves the
// convolutions to memunet's kernels. A backend without a provider (the
// CPU) ignores the key.
func ResolveConv(b backend.Backend, choice string, policy cudnn.Policy) error {
	r, ok := b.(ConvResolver)
	if !ok {
		return nil
	}
	p := cuda.ConvProvider{Choice: choice}
	var lib cuda.ConvLibrary
	if choice != "memunet" {
		var err error
		lib, err = openCUDNN(r)
		switch {
		case err == nil:
			p.CUDNN = lib.Name()
			if c, ok := lib.(interface{ CachePath() string }); ok {
				p.FindCache = c.CachePath()
			}
		case choice == "cudnn":
			return fmt.Errorf("cuda.conv: cudnn: %w; or set cuda.conv: auto (cuDNN where it loads, else memunet's kernels) or memunet", err)
		default:
			p.Missing = err.Error()
			if le := (*cudnn.LoadError)(nil); errors.As(err, &le) {
				p.Missing = le.Err.Error() // the cause; cuda.conv: cudnn gives the places tried
			}
		}
	}
	r.UseConvLibrary(lib, policy, choice == "cudnn")
	r.SetConvProvider(p)
	return nil
}
