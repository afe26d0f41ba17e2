//go:build gpu

package driverapi_test

import (
	"encoding/json"
	"testing"
)

// TestPageMoves measures what the caching pool pays to move a page on
// device 0 and logs it as one line, "page-moves: {json}", which
// tools/check/gpu-check.sh reads.
func TestPageMoves(t *testing.T) {
	m, err := device0(t).MeasurePageMoves(64)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(m)
	t.Logf("page-moves: %s", line)
}
