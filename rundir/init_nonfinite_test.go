package rundir

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/backend/cpu"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/safetensors"
)

// TestInitNonFiniteRefused: a train.init file holding a NaN or an
// infinity (fp32, fp16 or bf16) is refused before the first step, naming
// the file, the tensor and the index, not reported as a loss that became
// NaN at step 1 with advice on the learning rate.
func TestInitNonFiniteRefused(t *testing.T) {
	cfg := resumeConfig("fp32")
	cfg.Train.Steps = 1
	net, err := model.New(model.NewDevice(cpu.New(), memory.Options{}), cfg.ModelConfig(), cfg.Model.Seed)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Free()
	state := checkpoint.StateDict(net)
	const name = "down1.maxpool_conv.1.double_conv.0.weight"
	for _, tc := range []struct {
		dtype safetensors.DType
		bits  uint32 // the value at index 17, in dtype's bits
		what  string
	}{
		{safetensors.F32, math.Float32bits(float32(math.NaN())), "NaN"},
		{safetensors.F16, 0xfc00, "-Inf"},
		{safetensors.BF16, 0x7f80, "+Inf"},
	} {
		t.Run(string(tc.dtype), func(t *testing.T) {
			var ts []safetensors.Tensor
			found := false
			for _, tn := range state {
				if tn.DType == safetensors.F32 {
					tn = convert(t, tn, tc.dtype)
					if tn.Name == name {
						put(tn, 17, tc.bits)
						found = true
					}
				}
				ts = append(ts, tn)
			}
			if !found {
				t.Fatalf("no tensor %s", name)
			}
			path := filepath.Join(t.TempDir(), "init.safetensors")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := safetensors.Write(f, ts, nil); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			c := cfg
			c.Train.Init = path
			out := t.TempDir()
			_, err = Run(context.Background(), c, Options{OutDir: out})
			want := "train.init: " + path + `: tensor "` + name + `" holds ` + tc.what + " at index 17: the file is damaged or was trained to divergence; fine-tune from another file"
			var div *DivergedError
			if err == nil || err.Error() != want || errors.As(err, &div) {
				t.Fatalf("got %v\nwant %s", err, want)
			}
			if _, err := os.Stat(filepath.Join(out, runfiles.Checkpoints)); err == nil {
				t.Errorf("a checkpoint was written before the refusal")
			}
		})
	}
}

// convert is the F32 tensor tn in dtype (F32, F16 or BF16).
func convert(t *testing.T, tn safetensors.Tensor, dtype safetensors.DType) safetensors.Tensor {
	t.Helper()
	if dtype == safetensors.F32 {
		return safetensors.Tensor{Name: tn.Name, DType: dtype, Shape: tn.Shape, Data: append([]byte(nil), tn.Data...)}
	}
	v := make([]float32, tn.Numel())
	if err := tn.Float32(v); err != nil {
		t.Fatal(err)
	}
	out := safetensors.Tensor{Name: tn.Name, DType: dtype, Shape: tn.Shape, Data: make([]byte, 2*len(v))}
	for i, x := range v {
		h := backend.F32ToF16(x)
		if dtype == safetensors.BF16 {
			h = uint16(math.Float32bits(x) >> 16)
		}
		binary.LittleEndian.PutUint16(out.Data[2*i:], h)
	}
	return out
}

// put sets value i of tn to bits (4 or 2 bytes as its dtype has).
func put(tn safetensors.Tensor, i int, bits uint32) {
	if tn.DType == safetensors.F32 {
		binary.LittleEndian.PutUint32(tn.Data[4*i:], bits)
		return
	}
	binary.LittleEndian.PutUint16(tn.Data[2*i:], uint16(bits))
}
