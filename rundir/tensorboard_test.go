package rundir

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/runfiles"
	"github.com/memunet/memunet/tensorboard/tbtest"
	"github.com/memunet/memunet/train"
)

// readTB runs the Python reader on RUN/tb (every record's CRC is verified
// there) and returns each tag's values by step; a (tag, step) twice fails
// the test. Skipped without python3.
func readTB(t *testing.T, run string) (scalars map[string]map[int]float64, images map[int]int) {
	t.Helper()
	ev := tbtest.Read(t, filepath.Join(run, runfiles.TensorBoard))
	scalars, images = map[string]map[int]float64{}, map[int]int{}
	for _, f := range ev.Files {
		for _, e := range f.Events {
			for _, v := range e.Values {
				switch {
				case v.Image != nil:
					images[int(e.Step)]++
					if v.Image.Height < 128 || v.Image.Width < 3*v.Image.Height {
						t.Errorf("%s at step %d: a %dx%d picture", v.Tag, e.Step, v.Image.Width, v.Image.Height)
					}
				case v.SimpleValue != nil:
					if scalars[v.Tag] == nil {
						scalars[v.Tag] = map[int]float64{}
					}
					if _, dup := scalars[v.Tag][int(e.Step)]; dup {
						t.Errorf("%s at step %d twice (%s)", v.Tag, e.Step, f.Name)
					}
					scalars[v.Tag][int(e.Step)] = *v.SimpleValue
				}
			}
		}
	}
	return scalars, images
}

// metricsTags is metrics.jsonl as the TensorBoard tags it should give:
// each tag's float32 values by step.
func metricsTags(t *testing.T, run string) map[string]map[int]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]float64{}
	put := func(tag string, step int, v float64) {
		if out[tag] == nil {
			out[tag] = map[int]float64{}
		}
		out[tag][step] = float64(float32(v))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var s StepRecord
		var v checkpoint.ValRecord
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		switch s.Type {
		case "step":
			for tag, v := range map[string]float64{"train/loss": s.Loss, "train/lr": s.LR, "train/loss_scale": s.LossScale,
				"train/step_ms": s.StepMS, "memory/allocated_bytes": float64(s.AllocatedBytes), "memory/reserved_bytes": float64(s.ReservedBytes),
				"memory/peak_allocated_bytes": float64(s.PeakAllocatedBytes), "memory/peak_reserved_bytes": float64(s.PeakReservedBytes)} {
				put(tag, s.Step, v)
			}
			if s.CommMS > 0 {
				put("train/comm_ms", s.Step, s.CommMS)
			}
			if s.DeviceUsedBytes > 0 {
				put("memory/device_used_bytes", s.Step, float64(s.DeviceUsedBytes))
			}
		case "val":
			for tag, x := range map[string]float64{"val/loss": float64(v.ValLoss), "val/miou": v.ValMIoU, "val/dice": v.ValDice, "val/pixel_acc": v.ValPixelAcc} {
				put(tag, v.Step, x)
			}
			for _, c := range v.PerClass {
				if c.Present() {
					put(fmt.Sprintf("val/iou/class_%d", c.Class), v.Step, *c.IoU)
					put(fmt.Sprintf("val/dice/class_%d", c.Class), v.Step, *c.Dice)
				}
			}
		}
	}
	return out
}

// sameAsMetrics: every scalar of metrics.jsonl is in the event files at its
// step with its float32 value, and nothing else is.
func sameAsMetrics(t *testing.T, run string) map[int]int {
	t.Helper()
	got, images := readTB(t, run)
	want := metricsTags(t, run)
	for _, tag := range slices.Sorted(maps.Keys(want)) {
		for step, v := range want[tag] {
			if g, ok := got[tag][step]; !ok || g != v {
				t.Errorf("%s at step %d: event files %v (present %v), metrics.jsonl %v", tag, step, g, ok, v)
			}
		}
		if len(got[tag]) != len(want[tag]) {
			t.Errorf("%s: %d steps in the event files, %d in metrics.jsonl", tag, len(got[tag]), len(want[tag]))
		}
	}
	for tag := range got {
		if want[tag] == nil {
			t.Errorf("the event files have %s, metrics.jsonl has no such value", tag)
		}
	}
	return images
}

// TestTBObserverWritesMetrics: the observer's scalars are the records'
// values under their tags (each step once, CRCs verified by the Python
// reader), per class only where the class is present, device_used and
// comm_ms only where set, and a preview's pictures at its validation.
func TestTBObserverWritesMetrics(t *testing.T) {
	run := t.TempDir()
	f, err := os.Create(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	var preview *train.Preview
	o := newTBObserver(filepath.Join(run, runfiles.TensorBoard), 0, func(w string) { t.Error(w) }, func() *train.Preview { return preview })
	for step := 1; step <= 4; step++ {
		rec := StepRecord{Type: "step", Step: step, Loss: 1.0 / float64(step), LR: 3e-3, StepMS: 12.5 * float64(step), LossScale: 65536,
			AllocatedBytes: int64(step) << 20, ReservedBytes: 3 << 20, PeakAllocatedBytes: 5<<20 + 1, PeakReservedBytes: 6 << 20}
		if step == 3 {
			rec.DeviceUsedBytes, rec.CommMS = 7<<30, 0.25
		}
		o.observeStep(rec, train.StepResult{})
		enc.Encode(rec)
		if step%2 == 0 {
			iou, dice := 0.5, 2.0/3
			v := checkpoint.ValRecord{Type: "val", Step: step, Validation: metrics.Validation{ValLoss: 0.7, ValMIoU: 0.25 * float64(step), ValDice: 0.3, ValPixelAcc: 0.9,
				PerClass: []metrics.ClassScore{{Class: 0, IoU: &iou, Dice: &dice}, {Class: 1}, {Class: 2, IoU: &dice, Dice: &iou}}}}
			if step == 4 {
				preview = &train.Preview{N: 2, C: 3, H: 16, W: 16, Images: make([]float32, 2*3*256), Masks: make([]uint8, 512), Classes: make([]uint8, 512)}
			}
			o.observeValidation(v)
			enc.Encode(v)
		}
	}
	o.Close()
	f.Close()
	images := sameAsMetrics(t, run)
	if !maps.Equal(images, map[int]int{4: 2}) {
		t.Errorf("pictures by step %v, want 2 at step 4", images)
	}
}

// TestPreviewPicture: image, mask and prediction side by side, scaled to
// at least 128 pixels high, each channel stretched over its range, classes
// in their colors, Ignore white.
func TestPreviewPicture(t *testing.T) {
	p := &train.Preview{N: 1, C: 1, H: 16, W: 8, Images: make([]float32, 128), Masks: make([]uint8, 128), Classes: make([]uint8, 128)}
	p.Images[0], p.Images[1] = -2, 3 // the darkest and the brightest
	p.Masks[0], p.Classes[0] = data.Ignore, 2
	img := previewPicture(p, 0)
	const scale, gap = 8, 2
	if b := img.Bounds(); b.Dx() != 3*8*scale+2*gap || b.Dy() != 16*scale {
		t.Fatalf("picture %v", b)
	}
	for _, c := range []struct {
		x, y int
		want color.RGBA
	}{
		{0, 0, color.RGBA{0, 0, 0, 255}},
		{scale, scale - 1, color.RGBA{255, 255, 255, 255}},
		{2 * scale, 0, color.RGBA{102, 102, 102, 255}}, // 0 in [-2, 3]
		{8*scale + gap, 0, data.ClassColor(data.Ignore)},
		{8*scale + gap + scale, 0, data.ClassColor(0)},
		{2*(8*scale+gap) + scale - 1, scale - 1, data.ClassColor(2)},
		{8 * scale, 0, color.RGBA{128, 128, 128, 255}}, // the gutter
	} {
		if got := img.RGBAAt(c.x, c.y); got != c.want {
			t.Errorf("(%d,%d) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
