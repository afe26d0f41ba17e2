package cuda

import "fmt"

// ConvProvider is what config key cuda.conv resolved to on this backend:
// the choice, the cuDNN library loaded for it, or why none was.
//
// The backend does not call cuDNN's convolutions yet (issue 47: the
// descriptors, the workspace from the pool and the plan come next and
// need a GPU to verify), so memunet's kernels compute every convolution
// whatever was loaded; Computes and Note say so.
type ConvProvider struct {
	// Choice is cuda.conv: auto, cudnn or memunet ("": not resolved).
	Choice string
	// CUDNN names the cuDNN library loaded ("cuDNN 9.6.0 (CUDA 12.6) from
	// /usr/lib/x86_64-linux-gnu/libcudnn.so.9"), "" where none was.
	CUDNN string
	// Missing is why auto loaded no cuDNN (the loader's cause).
	Missing string
}

// Computes names who computes the convolutions: memunet's kernels, until
// the backend calls cuDNN's.
func (p ConvProvider) Computes() string { return "memunet" }

// Describe is the provider for the device's description (the banner,
// summary.json's device): "" before it is resolved.
func (p ConvProvider) Describe() string {
	switch {
	case p.Choice == "":
		return ""
	case p.CUDNN != "":
		return fmt.Sprintf("convolutions: memunet's kernels (cuda.conv %s; %s loaded, its convolutions not called yet)", p.Choice, p.CUDNN)
	}
	return fmt.Sprintf("convolutions: memunet's kernels (cuda.conv %s)", p.Choice)
}

// Note is the run's note on the provider: what was loaded and what
// computes, where cuda.conv asked for cuDNN; "" for memunet.
func (p ConvProvider) Note() string {
	switch {
	case p.Choice == "" || p.Choice == "memunet":
		return ""
	case p.CUDNN != "":
		return fmt.Sprintf("cuda.conv: %s: loaded %s; the CUDA backend does not call cuDNN's convolutions yet (issue 47), so memunet's kernels compute them",
			p.Choice, p.CUDNN)
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
