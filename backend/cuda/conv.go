package cuda

import (
	"fmt"

	"github.com/memunet/memunet/backend/cuda/cudnn"
)

// ConvProvider is what config key cuda.conv resolved to on this backend:
// the choice, the cuDNN library that computes the convolutions, or
// why none does.
type ConvProvider struct {
	// Choice is cuda.conv: auto, cudnn or memunet ("": not resolved).
	Choice string
	// CUDNN names the cuDNN library that computes the convolutions
	// ("cuDNN 9.6.0 (CUDA 12.6) from
	// /usr/lib/x86_64-linux-gnu/libcudnn.so.9"), "" where none does.
	CUDNN string
	// Missing is why auto opened no cuDNN (the loader's cause).
	Missing string
	// FindCache is the file cuDNN's Find results are kept in, so that
	// every run on this GPU and cuDNN chooses alike ("": none).
	FindCache string
}

// Computes names who computes the convolutions: cudnn or memunet.
func (p ConvProvider) Computes() string {
	if p.CUDNN != "" {
		return "cudnn"
	}
	return "memunet"
}

// Describe is the provider for the device's description (the banner,
// summary.json's device): "" before it is resolved.
func (p ConvProvider) Describe() string {
	switch {
	case p.Choice == "":
		return ""
	case p.CUDNN != "":
		return fmt.Sprintf("convolutions: %s (cuda.conv %s)", p.CUDNN, p.Choice)
	}
	return fmt.Sprintf("convolutions: memunet's kernels (cuda.conv %s)", p.Choice)
}

// Note is the run's note on the provider: who computes, where cuda.conv
// asked for cuDNN; "" for memunet.
func (p ConvProvider) Note() string {
	switch {
	case p.Choice == "" || p.Choice == "memunet":
		return ""
	case p.CUDNN != "" && p.FindCache != "":
		return fmt.Sprintf("cuda.conv: %s: %s computes the convolutions, each pass by the fastest algorithm that "+
			"cuda.workspace and cuda.deterministic admit; its Find's times are kept in %s "+
			"(delete it to measure again)", p.Choice, p.CUDNN, p.FindCache)
	case p.CUDNN != "":
		return fmt.Sprintf("cuda.conv: %s: %s computes the convolutions, each pass by the fastest algorithm that "+
			"cuda.workspace and cuda.deterministic admit; its Find's times are measured "+
			"afresh by each process (%s off), so two runs may choose differently", p.Choice, p.CUDNN, cudnn.CacheEnv)
	}
	return fmt.Sprintf("cuda.conv: %s: memunet's kernels compute the convolutions (%s; --set cuda.conv=cudnn says where it looked)", p.Choice, p.Missing)
}

// SetConvProvider records what cuda.conv resolved to (device.ResolveConv).
func (b *Backend) SetConvProvider(p ConvProvider) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conv = p
}

// ConvProvider is what SetConvProvider recorded.
func (b *Backend) ConvProvider() ConvProvider {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conv
}
