//go:build gpu

package cudnn

// Provider is a Handle as the CUDA backend's convolution library
// (cuda.ConvLibrary): each call is made with the device's context
// current, through on (the backend's OnContext).
type Provider struct {
	h  *Handle
	on func(func() error) error
}

// NewProvider is h as a convolution library whose calls run through on.
func NewProvider(h *Handle, on func(func() error) error) *Provider { return &Provider{h: h, on: on} }

// Name names the library: "cuDNN 9.6.0 (CUDA 12.6) from ...".
func (p *Provider) Name() string { return p.h.lib.String() }

// Find is Handle.Find with the context current.
func (p *Provider) Find(pass Pass, s Shape, precision string) ([]Result, error) {
	var out []Result
	err := p.on(func() error {
		var err error
		out, err = p.h.Find(pass, s, precision)
		return err
	})
	return out, err
}

// Run is Handle.Run with the context current.
func (p *Provider) Run(pass Pass, s Shape, precision string, algo int, b Buffers) error {
	return p.on(func() error { return p.h.Run(pass, s, precision, algo, b) })
}
