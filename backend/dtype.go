package backend

import "fmt"

// DType is how a buffer stores its values. Arithmetic is float32 whatever
// the storage: 16-bit values are widened on the way into a computation and
// rounded (to nearest even) on the way out.
type DType uint8

const (
	Float32  DType = iota // IEEE binary32
	Float16               // IEEE binary16 bits
	BFloat16              // bfloat16 bits (the upper half of a float32)
	Uint8                 // bytes: class indices, max-pool positions
)

// Size is the bytes per value.
func (d DType) Size() int {
	switch d {
	case Float32:
		return 4
	case Uint8:
		return 1
	}
	return 2
}

// Half reports a 16-bit float type.
func (d DType) Half() bool { return d == Float16 || d == BFloat16 }

// String is the name a config uses: fp32, fp16, bf16 (u8 for bytes).
func (d DType) String() string {
	switch d {
	case Float32:
		return "fp32"
	case Float16:
		return "fp16"
	case BFloat16:
		return "bf16"
	case Uint8:
		return "u8"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Precisions lists the storage types a run may train in, by name.
func Precisions() []DType { return []DType{Float32, Float16, BFloat16} }

// ParsePrecision turns fp32, fp16 or bf16 into its DType: the one parser of
// train.precision and --precision.
func ParsePrecision(name string) (DType, error) {
	for _, d := range Precisions() {
		if d.String() == name {
			return d, nil
		}
	}
	return Float32, fmt.Errorf("%q: must be fp32, fp16 or bf16", name)
}

// MarshalText writes the name (fp32, fp16, bf16, u8), so a DType reads the
// same in YAML and JSON as in a config file.
func (d DType) MarshalText() ([]byte, error) {
	if d > Uint8 {
		return nil, fmt.Errorf("backend: no name for %v", d)
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads a precision name (fp32, fp16 or bf16): the storage
// types a run may train in.
func (d *DType) UnmarshalText(b []byte) error {
	p, err := ParsePrecision(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}
