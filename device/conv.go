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
}

// ResolveConv resolves cuda.conv (choice: auto, cudnn or memunet) on b and
// records it there: memunet loads nothing; cudnn loads cuDNN (cudnn.Load)
// and is an error naming every place tried and the fix where none is
// usable; auto loads it where it can and records why not otherwise. A
// backend without a provider (the CPU) ignores choice.
func ResolveConv(b backend.Backend, choice string) error {
	r, ok := b.(ConvResolver)
	if !ok {
		return nil
	}
	p := cuda.ConvProvider{Choice: choice}
	if choice != "memunet" {
		lib, err := loadCUDNN()
		switch {
		case err == nil:
			p.CUDNN = lib
		case choice == "cudnn":
			return fmt.Errorf("cuda.conv: cudnn: %w; or set cuda.conv: auto (cuDNN where it loads, else memunet's kernels) or memunet", err)
		default:
			p.Missing = err.Error()
			if le := (*cudnn.LoadError)(nil); errors.As(err, &le) {
				p.Missing = le.Err.Error() // the cause; cuda.conv: cudnn gives the places tried
			}
		}
	}
	r.SetConvProvider(p)
	return nil
}
