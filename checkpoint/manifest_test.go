package checkpoint

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
)

// TestConfigRoundTrip: a configuration goes through a manifest's JSON and
// back unchanged, seeds beyond float64's integers included.
func TestConfigRoundTrip(t *testing.T) {
	c := config.Default()
	c.Model.Seed, c.Data.Seed, c.Train.Seed = math.MaxUint64, 1<<53+1, 7
	c.Model.Checkpoint = config.Checkpoint{Levels: []int{0, 2}}
	c.Data.Resize = []int{64, 48}
	c.Memory.Capacity = 6 << 30
	c.Train.Precision, c.Train.Scaler.Enabled = backend.Float16, "true"
	c.Train.Eps, c.Train.LR = 1e-8, 0.1+0.2
	m, err := ConfigMap(c)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(Manifest{Config: m})
	if err != nil {
		t.Fatal(err)
	}
	var back Manifest
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	got, err := manifestConfig("x", back.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("config changed through the manifest:\n%+v\n%+v", got, c)
	}
}

// TestOpenRefusesAnotherArchitecture: a manifest whose configuration
// claims another width than its tensors (one edited by hand, its checksum
// made again) is refused as a mismatch naming the first tensor and both
// shapes, before any model of that width is allocated.
func TestOpenRefusesAnotherArchitecture(t *testing.T) {
	claimed := tinyConfig()
	claimed.Model.Base = 4096
	_, ck := saveRunClaiming(t, t.TempDir(), claimed)
	_, err := Open(ck)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "inc.double_conv.0.weight: checkpoint [4 3 3 3], model [4096 3 3 3]") ||
		!strings.Contains(err.Error(), "base 4096") {
		t.Fatalf("got %v, want a mismatch naming inc.double_conv.0.weight's two shapes", err)
	}
}
