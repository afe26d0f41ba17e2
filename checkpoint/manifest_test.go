package checkpoint

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/optim"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/safetensors"
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

// saveRunManifest is saveRun with the manifest changed by edit before it
// is written (its checksum made to match, as a forger would).
func saveRunManifest(t *testing.T, run string, edit func(*Manifest)) string {
	t.Helper()
	net := tinyModel(t)
	cm, err := ConfigMap(tinyConfig())
	if err != nil {
		t.Fatal(err)
	}
	write := func(ts []safetensors.Tensor) func(io.Writer) error {
		return func(w io.Writer) error { return safetensors.Write(w, ts, nil) }
	}
	dir, err := Save(filepath.Join(run, runfiles.Checkpoints), runfiles.CheckpointName(1, 1), []Part{{Name: runfiles.Model, Write: write(StateDict(net))}, {Name: runfiles.Optimizer, Write: write(nil)}},
		func(sums map[string]Sum) ([]byte, error) {
			m := Manifest{Format: Format, FormatVersion: FormatVersion, Serial: 1, Step: 1, Config: cm, Files: sums,
				Metrics: MetricsHistory{Steps: []StepPoint{{Step: 1, Epoch: 1}}, Val: []ValRecord{{Type: "val", Step: 1, Epoch: 1}}}}
			edit(&m)
			return json.Marshal(m)
		})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestManifestRanges: a manifest whose step, epoch or count is negative or
// above MaxCount (a forged step of 2^62 would overflow a hint's doubling)
// is refused naming manifest.json, the field and the bound; MaxCount
// itself is accepted; a serial past it is not taken for a readable one
// (the next checkpoint's serial is one more than the largest).
func TestManifestRanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Manifest)
		want string // "": opens
	}{
		{"valid", func(*Manifest) {}, ""},
		{"at the bound", func(m *Manifest) { m.Step, m.Adam.Step, m.Serial = MaxCount, MaxCount, MaxCount }, ""},
		{"step 2^62", func(m *Manifest) { m.Step = 1 << 62 }, "step is 4611686018427387904, outside 0 to 1099511627776"},
		{"step -5", func(m *Manifest) { m.Step = -5 }, "step is -5, outside 0 to 1099511627776"},
		{"epoch", func(m *Manifest) { m.Epoch = -1 }, "epoch is -1"},
		{"serial", func(m *Manifest) { m.Serial = math.MaxInt }, "serial is 9223372036854775807"},
		{"micro-batches", func(m *Manifest) { m.Position.MicroBatches = MaxCount + 1 }, "position.micro_batches is 1099511627777"},
		{"per epoch", func(m *Manifest) { m.Position.MicroBatchesPerEpoch = -2 }, "position.micro_batches_per_epoch is -2"},
		{"adam", func(m *Manifest) { m.Adam.Step = math.MinInt64 }, "adam.step is -9223372036854775808"},
		{"scaler", func(m *Manifest) { m.Scaler.Skipped = -1 }, "scaler.skipped_steps is -1"},
		{"world", func(m *Manifest) { m.World = -3 }, "world_size is -3"},
		{"early stop", func(m *Manifest) { m.EarlyStop = &EarlyStopState{Wait: -1} }, "early_stop.wait is -1"},
		{"schedule", func(m *Manifest) { m.Schedule = &optim.ScheduleState{BadValidations: -1} }, "schedule.bad_validations is -1"},
		{"history step", func(m *Manifest) { m.Metrics.Steps = append(m.Metrics.Steps, StepPoint{Step: 1 << 50}) }, "metrics.steps[1].step is 1125899906842624"},
		{"val epoch", func(m *Manifest) { m.Metrics.Val[0].Epoch = -7 }, "metrics.val[0].epoch is -7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := saveRunManifest(t, t.TempDir(), tc.edit)
			_, err := Open(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			want := "checkpoint " + dir + ": manifest.json: " + tc.want
			if !errors.Is(err, ErrFormat) || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "the manifest was edited or is damaged; use another checkpoint") {
				t.Errorf("got %v\nwant %s...", err, want)
			}
		})
	}

	run := t.TempDir()
	saveRunManifest(t, run, func(m *Manifest) { m.Serial = MaxCount + 1 })
	list, err := ListRun(filepath.Join(run, runfiles.Checkpoints))
	if err != nil || len(list) != 1 || list[0].Readable {
		t.Errorf("a serial past MaxCount listed as readable: %v %+v", err, list)
	}
}
