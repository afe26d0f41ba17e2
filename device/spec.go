package device

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is a kind of device.
type Kind string

const (
	Auto Kind = "auto" // the GPU in a gpu build, else the CPU
	CPU  Kind = "cpu"
	CUDA Kind = "cuda"
)

// Spec is config key device: auto, cpu, or cuda with a device ordinal
// (cuda is cuda:0).
type Spec struct {
	Kind  Kind
	Index int // CUDA device ordinal
}

// Parse reads auto, cpu, cuda or cuda:N.
func Parse(s string) (Spec, error) {
	switch t := strings.TrimSpace(s); {
	case t == string(Auto), t == "":
		return Spec{Kind: Auto}, nil
	case t == string(CPU):
		return Spec{Kind: CPU}, nil
	case t == string(CUDA):
		return Spec{Kind: CUDA}, nil
	case strings.HasPrefix(t, "cuda:"):
		n, err := strconv.Atoi(strings.TrimPrefix(t, "cuda:"))
		if err != nil || n < 0 {
			return Spec{}, fmt.Errorf("%q: cuda:N needs a device ordinal N >= 0 (as nvidia-smi numbers them), e.g. cuda:0", s)
		}
		return Spec{Kind: CUDA, Index: n}, nil
	}
	return Spec{}, fmt.Errorf("%q: must be auto, cpu, cuda or cuda:N", s)
}

// String is the spec as a config writes it.
func (s Spec) String() string {
	switch s.Kind {
	case CUDA:
		return fmt.Sprintf("cuda:%d", s.Index)
	case "":
		return string(Auto)
	}
	return string(s.Kind)
}

// MarshalText writes String.
func (s Spec) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what Parse reads.
func (s *Spec) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}
