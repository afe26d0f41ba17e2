//go:build gpu

package cudnn

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/memunet/memunet/backend"
)

// TestRecordThroughStub runs Record on a stub cuDNN that answers any
// shape with the same three rows: every layer and pass is asked (no input
// gradient for the first), the table checks and holds the policy, and it
// reads back from JSON as written. The device's own tables are recorded
// by backend/cuda/driverapi's TestRecordAlgorithmTables.
func TestRecordThroughStub(t *testing.T) {
	l, h := findHandle(t, 90600, "#define ANY_SHAPE\n"+findStub+runStub)
	layers := backend.SeedUNetConvolutions(64, 256, 4)
	tab, err := h.Record(layers, "stub", "bf16")
	if err != nil {
		t.Fatal(err)
	}
	holdPolicy(t, "recorded bf16", tab)
	if want := 3*len(layers) - 1; len(tab.Layers) != want {
		t.Errorf("%d entries, want %d (3 passes of %d layers, no input gradient for the first)", len(tab.Layers), want, len(layers))
	}
	b, err := json.Marshal(tab)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bf16.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var back Table
	raw, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(raw, &back)
	}
	if err != nil || back.CUDNN != l.String() || len(back.Layers) != len(tab.Layers) ||
		back.Layers[0].Pass != Forward || len(back.Layers[0].Results) != 3 || back.Layers[1].Pass != BackwardFilter {
		t.Errorf("bf16.json reads back as %+v (%v)", back, err)
	}
}
