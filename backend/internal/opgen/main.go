// Command opgen writes what backend/ops.go, the table of the Backend's
// operations, decides: the Method enum, the noop backend's methods, each
// backend's Supports and composed methods, the CUDA backend's Kernel enum
// and generated methods, the CUDA emulator's dispatch, backendtest's
// registration and the operation lists of docs/design.md and backend/doc.go.
// It checks the table against the kernels (backend/cuda/kernels/*.cu), the
// backends' own methods and backendtest's cases, and stops naming what is
// missing.
//
// go generate ./backend runs it (ops.go's //go:generate line); it writes
// only files whose contents change. It needs no CUDA toolkit: the fatbins
// are go generate -tags cudagen ./backend/cuda's.
package main

import (
	"github.com/memunet/memunet/internal/genfiles"
)

func main() { genfiles.Main("opgen", Generate) }
