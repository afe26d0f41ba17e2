//go:build gpu

package cudnn

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
)

// TestRecordAlgorithmTables is the device run's part: on a GPU with a
// cuDNN the loader finds, cuDNN's Find for every convolution of the seed
// UNet (base 64, 256 px, batch 4) and pass (no input gradient for the
// first), at each of MEMUNET_CUDNN_TABLE_PRECISIONS (tf32,fp16,bf16),
// checked (Table.Check) and held to the policy's invariants at every
// budget, and written as <precision>.json into MEMUNET_CUDNN_TABLES where
// that is set: the tables to commit into testdata in place of the
// hand-written one. It skips where the driver cannot start or no cuDNN
// loads (the device check counts a skip as no result).
func TestRecordAlgorithmTables(t *testing.T) {
	if why, ok := driverState(); !ok {
		t.Skipf("no GPU here: %s", why)
	}
	l, err := Load()
	if err != nil {
		t.Skipf("no cuDNN: %v", err)
	}
	h, err := l.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	device := "cuda:0"
	if out, err := exec.Command("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader", "-i", "0").Output(); err == nil {
		device = "cuda:0 " + strings.TrimSpace(string(out))
	}
	precs := os.Getenv("MEMUNET_CUDNN_TABLE_PRECISIONS")
	if precs == "" {
		precs = "tf32,fp16,bf16"
	}
	for _, prec := range strings.Split(precs, ",") {
		record(t, h, l, device, prec, os.Getenv("MEMUNET_CUDNN_TABLES"))
	}
}

// record is TestRecordAlgorithmTables's table at one precision, written
// into dir where dir is not "".
func record(t *testing.T, h *Handle, l *Library, device, prec, dir string) Table {
	t.Helper()
	const base, size, batch = 64, 256, 4
	tab := Table{Note: "recorded by TestRecordAlgorithmTables: cudnnFind*Algorithm on the seed UNet's convolutions (base 64, 256 px, batch 4), unedited",
		Device: device, CUDNN: l.String(), Precision: prec}
	for _, ls := range backend.SeedUNetConvolutions(base, size, batch) {
		c := ls.Conv
		s := Shape{Input: []int{c.N, c.C, c.H, c.W}, Filter: []int{c.OC, c.C, c.K, c.K}, Pad: c.Pad, Stride: 1}
		for p := Forward; p < numPasses; p++ {
			if p == BackwardData && ls.NoInputGrad {
				continue
			}
			rs, err := h.Find(p, s, prec)
			if err != nil {
				t.Fatalf("%s %s: %v", ls.Name, p, err)
			}
			tab.Layers = append(tab.Layers, Entry{Layer: ls.Name, Pass: p, Shape: s, Results: rs})
		}
	}
	if err := tab.Check(); err != nil {
		t.Fatalf("%s: %v", prec, err)
	}
	holdPolicy(t, "recorded "+prec, tab)
	plan, err := Policy{WorkspaceBytes: 256 << 20, Deterministic: true}.Plan(tab)
	t.Logf("%s: %s, %d entries; the default policy's workspace %d bytes (%v)", prec, l, len(tab.Layers), plan.WorkspaceBytes, err)
	if dir != "" {
		b, err := json.MarshalIndent(tab, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, prec+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tab
}

// TestRecordThroughStub runs record on a stub cuDNN that answers any shape
// with the same three rows: every layer and pass is asked, the table
// checks, and the file written reads back as the table.
func TestRecordThroughStub(t *testing.T) {
	path := stubWith(t, filepath.Join(t.TempDir(), "libcudnn.so.9"), 90600, "#define ANY_SHAPE\n"+findStub+runStub, findCode())
	l, err := open(only(path))
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tab := record(t, h, l, "stub", "bf16", dir)
	layers := backend.SeedUNetConvolutions(64, 256, 4)
	if want := 3*len(layers) - 1; len(tab.Layers) != want {
		t.Errorf("%d entries, want %d (3 passes of %d layers, no input gradient for the first)", len(tab.Layers), want, len(layers))
	}
	b, err := os.ReadFile(filepath.Join(dir, "bf16.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Table
	if err := json.Unmarshal(b, &back); err != nil || back.CUDNN != l.String() || len(back.Layers) != len(tab.Layers) ||
		back.Layers[0].Pass != Forward || len(back.Layers[0].Results) != 3 {
		t.Errorf("bf16.json reads back as %+v (%v)", back, err)
	}
}

// TestHandleOnDevice: on a GPU with a cuDNN the loader finds, a handle is
// made, set to the default stream and destroyed.
func TestHandleOnDevice(t *testing.T) {
	if why, ok := driverState(); !ok {
		t.Skipf("no GPU here: %s", why)
	}
	l, err := Load()
	if err != nil {
		t.Skipf("no cuDNN: %v", err)
	}
	t.Log(l)
	h, err := l.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetStream(0); err != nil {
		t.Error(err)
	}
	if err := h.Close(); err != nil {
		t.Error(err)
	}
}
