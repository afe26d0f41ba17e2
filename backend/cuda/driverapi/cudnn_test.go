//go:build gpu

package driverapi_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/backendtest"
	"github.com/memunet/memunet/backend/cuda"
	"github.com/memunet/memunet/backend/cuda/cudnn"
)

// withCUDNN is device 0's backend with cuDNN as its convolution library
// under policy (required), given back to memunet's kernels when the test
// ends; it skips where there is no GPU or no cuDNN.
func withCUDNN(t *testing.T, policy cudnn.Policy) (*cuda.Backend, *cudnn.Library) {
	t.Helper()
	b := device0(t)
	l, err := cudnn.Load()
	if err != nil {
		t.Skipf("no cuDNN: %v", err)
	}
	lib, err := b.OpenConvLibrary(func() (cuda.ConvLibrary, error) {
		h, err := l.NewHandle()
		if err != nil {
			return nil, err
		}
		return cudnn.NewProvider(h, b.OnContext, nil), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.UseConvLibrary(lib, policy, true)
	t.Cleanup(func() { b.UseConvLibrary(nil, cudnn.Policy{}, false) })
	return b, l
}

// TestConformanceCUDNN runs the backend conformance suite on CUDA device
// 0 with cuDNN computing the convolutions, 2D and 3D (cuda.conv cudnn, the
// default policy), then lists each shape's chosen algorithms; none may
// have fallen back to memunet's kernels.
func TestConformanceCUDNN(t *testing.T) {
	b, l := withCUDNN(t, cudnn.Policy{WorkspaceBytes: 256 << 20, Deterministic: true})
	t.Logf("%s; %s", b.Describe(), l)
	backendtest.Run(t, b)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, c := range b.ConvChoices() {
		if c.Fallback != "" {
			t.Errorf("%s (%s): memunet's kernels computed it: %s", c.Shape, c.Precision, c.Fallback)
			continue
		}
		names := make([]string, len(c.Algorithms))
		for i, a := range c.Algorithms {
			names[i] = a.Pass.String() + " " + a.Name
		}
		t.Logf("%s (%s): %s; workspace %d bytes", c.Shape, c.Precision, strings.Join(names, ", "), c.WorkspaceBytes)
	}
}

// TestRecordAlgorithmTables is the device run's part: on a GPU with a
// cuDNN the loader finds, cuDNN's Find for every convolution of the seed
// UNet (base 64, 256 px, batch 4) and pass (no input gradient for the
// first), at each of MEMUNET_CUDNN_TABLE_PRECISIONS (tf32,fp16,bf16),
// written as <precision>.json into MEMUNET_CUDNN_TABLES where that is
// set: the tables to commit into backend/cuda/cudnn/testdata, where the
// policy's tests hold them. It skips where there is no GPU or no cuDNN.
func TestRecordAlgorithmTables(t *testing.T) {
	b := device0(t)
	l, err := cudnn.Load()
	if err != nil {
		t.Skipf("no cuDNN: %v", err)
	}
	device := b.Describe()
	if out, err := exec.Command("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader", "-i", "0").Output(); err == nil {
		device = "cuda:0 " + strings.TrimSpace(string(out))
	}
	precs := os.Getenv("MEMUNET_CUDNN_TABLE_PRECISIONS")
	if precs == "" {
		precs = "tf32,fp16,bf16"
	}
	dir := os.Getenv("MEMUNET_CUDNN_TABLES")
	err = b.OnContext(func() error {
		h, err := l.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		for _, prec := range strings.Split(precs, ",") {
			tab, err := h.Record(backend.SeedUNetConvolutions(64, 256, 4), device, prec)
			if err != nil {
				return err
			}
			plan, perr := cudnn.Policy{WorkspaceBytes: 256 << 20, Deterministic: true}.Plan(tab)
			t.Logf("%s: %s, %d entries; the default policy's workspace %d bytes (%v)", prec, l, len(tab.Layers), plan.WorkspaceBytes, perr)
			if dir == "" {
				continue
			}
			raw, err := json.MarshalIndent(tab, "", " ")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, prec+".json"), append(raw, '\n'), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHandleOnDevice: on a GPU with a cuDNN the loader finds, a handle is
// made in device 0's context, set to the default stream and destroyed.
func TestHandleOnDevice(t *testing.T) {
	b := device0(t)
	l, err := cudnn.Load()
	if err != nil {
		t.Skipf("no cuDNN: %v", err)
	}
	t.Log(l)
	err = b.OnContext(func() error {
		h, err := l.NewHandle()
		if err != nil {
			return err
		}
		if err := h.SetStream(0); err != nil {
			h.Close()
			return err
		}
		return h.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}
