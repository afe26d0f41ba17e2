package rundir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/runfiles"
)

// forgeStep rewrites the step of the checkpoint in dir's manifest, its
// checksum made to match, as a forger would.
func forgeStep(t *testing.T, dir string, step int64) {
	t.Helper()
	path := filepath.Join(dir, runfiles.Manifest)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	m["step"] = step
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, runfiles.ManifestSum), []byte(hex.EncodeToString(sum[:])+"  "+runfiles.Manifest+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFinishedHintNeverOverflows: resuming a finished run proposes twice
// its steps, saturated at train.steps' maximum (a value the
// configuration accepts), none at that maximum; a manifest whose step
// is out of range (2^62, -5) is refused naming the field and the file,
// never turned into a hint such as train.steps=-9223372036854775808.
func TestFinishedHintNeverOverflows(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps, cfg.Train.ValEvery, cfg.Train.CheckpointEvery = 1, 0, 1
	out := t.TempDir()
	sum := mustRun(t, context.Background(), cfg, Options{OutDir: out}, nil)
	ck := sum.LastCheckpoint
	for _, tc := range []struct {
		step int64
		want string
	}{
		{4, "already finished: 4/1 steps; to train further raise train.steps, e.g. "},
		{600_000_000, "--set train.steps=1000000000"}, // not 1200000000, above the maximum
		{config.MaxSteps, "already finished: 1000000000/1 steps, at or past train.steps' maximum of 1000000000: it trains no further"},
		{1 << 62, "manifest.json: step is 4611686018427387904, outside 0 to 1099511627776: the manifest was edited or is damaged"},
		{-5, "manifest.json: step is -5, outside 0 to"},
	} {
		forgeStep(t, ck, tc.step)
		_, err := Run(context.Background(), cfg, Options{OutDir: out, Resume: ck})
		var fin *FinishedError
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "steps=-") ||
			errors.As(err, &fin) != (tc.step >= 0 && tc.step <= checkpoint.MaxCount) {
			t.Errorf("step %d: got %v\nwant %q", tc.step, err, tc.want)
		}
	}
}
