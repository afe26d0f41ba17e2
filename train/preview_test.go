package train

import (
	"math"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/model"
)

// TestValidatePreview: with PreviewImages set, Validate keeps the first
// validation images as the data gives them, their masks, and the classes
// of an eval forward on them (fp32 and bf16 logits); the validation's
// figures are those of a run without it, and the pool's peak too.
func TestValidatePreview(t *testing.T) {
	for _, prec := range []backend.DType{backend.Float32, backend.BFloat16} {
		t.Run(prec.String(), func(t *testing.T) {
			c := tinyConfig()
			c.Train.Precision = prec
			tr := testTrainer(t, c)
			if _, err := tr.Step(); err != nil {
				t.Fatal(err)
			}
			tr.Pool().ResetPeak()
			plain, err := tr.Validate()
			if err != nil {
				t.Fatal(err)
			}
			peak := tr.Pool().Stats().Allocated.Peak
			if tr.Preview != nil {
				t.Fatal("a preview without PreviewImages")
			}
			tr.PreviewImages = 3
			tr.Pool().ResetPeak()
			v, err := tr.Validate()
			if err != nil {
				t.Fatal(err)
			}
			if v.ValLoss != plain.ValLoss || v.ValMIoU != plain.ValMIoU || tr.Pool().Stats().Allocated.Peak != peak {
				t.Errorf("validation changed by the preview: %+v vs %+v, peak %d vs %d", v, plain, tr.Pool().Stats().Allocated.Peak, peak)
			}
			p := tr.Preview
			h, w := tr.data.Size()
			ch := tr.data.Channels()
			if p == nil || p.N != 3 || p.C != ch || p.H != h || p.W != w {
				t.Fatalf("preview %+v", p)
			}
			images := make([]float32, 3*ch*h*w)
			masks := make([]uint8, 3*h*w)
			if err := data.FillBatch(tr.data, tr.valIdx[:3], images, masks); err != nil {
				t.Fatal(err)
			}
			for i := range images {
				if images[i] != p.Images[i] {
					t.Fatalf("image value %d: %g, want %g", i, p.Images[i], images[i])
				}
			}
			x, err := model.NewTensor(tr.Device, memory.Activations, backend.Float32, 3, ch, h, w)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Release()
			x.Write(images)
			logits, err := tr.Net.Forward(&model.Env{Device: tr.Device, Precision: prec}, x)
			if err != nil {
				t.Fatal(err)
			}
			scores := backend.DownloadFloat32(tr.Device.Backend, logits.View())
			logits.Release()
			k, plane := tr.Net.Config.Classes, h*w
			for i := range 3 {
				for q := range plane {
					best, bestV := 0, float32(math.Inf(-1))
					for j := range k {
						if v := scores[(i*k+j)*plane+q]; v > bestV {
							best, bestV = j, v
						}
					}
					if p.Classes[i*plane+q] != uint8(best) || p.Masks[i*plane+q] != masks[i*plane+q] {
						t.Fatalf("image %d pixel %d: class %d mask %d, want %d and %d", i, q, p.Classes[i*plane+q], p.Masks[i*plane+q], best, masks[i*plane+q])
					}
				}
			}
		})
	}
}
