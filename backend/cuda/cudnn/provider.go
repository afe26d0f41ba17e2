//go:build gpu

package cudnn

// Provider is a Handle as the CUDA backend's convolution library
// (cuda.ConvLibrary): each call is made with the device's context
// current, through on (the backend's OnContext), and Find's results are
// kept in a FindCache (nil: none), so that every run on this GPU and
// cuDNN chooses alike.
type Provider struct {
	h     *Handle
	on    func(func() error) error
	cache *FindCache
}

// NewProvider is h as a convolution library whose calls run through on,
// its Find results kept in cache.
func NewProvider(h *Handle, on func(func() error) error, cache *FindCache) *Provider {
	return &Provider{h: h, on: on, cache: cache}
}

// Name names the library: "cuDNN 9.6.0 (CUDA 12.6) from ...".
func (p *Provider) Name() string { return p.h.lib.String() }

// CachePath is the Find cache's file, "" where there is none.
func (p *Provider) CachePath() string { return p.cache.Path() }

// Find is the cache's results for pass of s at precision, else
// Handle.Find's with the context current, put in the cache. A cache that
// cannot be written stays as it was: the run goes on with this process's
// results, and the next process measures again.
func (p *Provider) Find(pass Pass, s Shape, precision string) ([]Result, error) {
	if rs, ok := p.cache.Get(pass, s, precision); ok {
		return rs, nil
	}
	var out []Result
	err := p.on(func() error {
		var err error
		out, err = p.h.Find(pass, s, precision)
		return err
	})
	if err == nil {
		_ = p.cache.Put(pass, s, precision, out) // see above: not fatal
	}
	return out, err
}

// Run is Handle.Run with the context current.
func (p *Provider) Run(pass Pass, s Shape, precision string, a Algorithm, b Buffers) error {
	return p.on(func() error { return p.h.Run(pass, s, precision, a, b) })
}
