package metrics

import (
	"encoding/json"
	"math"
)

// Loss is a validation loss. JSON has no NaN or infinity, and a 16-bit
// evaluation can overflow (fp16's largest value is 65504), so a loss that
// is not finite is written as null and null is read back as NaN: the
// record, the summary and the checkpoint's history are still written.
type Loss float64

// Finite reports whether l is neither NaN nor infinite.
func (l Loss) Finite() bool { return !math.IsNaN(float64(l)) && !math.IsInf(float64(l), 0) }

// MarshalJSON writes l, or null where it is not finite.
func (l Loss) MarshalJSON() ([]byte, error) {
	if !l.Finite() {
		return []byte("null"), nil
	}
	return json.Marshal(float64(l))
}

// UnmarshalJSON reads a number, or null as NaN.
func (l *Loss) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = Loss(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*l = Loss(f)
	return nil
}
