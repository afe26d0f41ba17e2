package cuda

import (
	"fmt"
	"time"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/memory"
)

// LayerTime is one pass of one layer at one precision: the fastest of the
// benchmark's repetitions, on the backend's clock.
type LayerTime struct {
	Base      int     `json:"base"`
	Size      int     `json:"size"`
	Layer     string  `json:"layer"`
	N         int     `json:"n"`
	C         int     `json:"c"`
	OC        int     `json:"oc"`
	H         int     `json:"h"`
	W         int     `json:"w"`
	K         int     `json:"k"`
	Count     int     `json:"count"`
	Pass      string  `json:"pass"`      // forward, backward-data, backward-weight
	Precision string  `json:"precision"` // tf32, fp16, bf16, or fp32 (exact, cuda.tf32 false)
	MS        float64 `json:"ms"`
	TFLOPs    float64 `json:"tflops"` // 2*N*OH*OW*OC*C*K*K a pass, per second, in 10^12
}

// benchPrecision is a precision of BenchLayers: its storage type and
// TF32's setting.
func benchPrecision(name string) (dt backend.DType, tf32, ok bool) {
	switch name {
	case "tf32":
		return backend.Float32, true, true
	case "fp32":
		return backend.Float32, false, true
	case "fp16":
		return backend.Float16, false, true
	case "bf16":
		return backend.BFloat16, false, true
	}
	return 0, false, false
}

// BenchLayers times the forward pass, the input gradient and the weight
// gradient of each layer at each precision (tf32, fp32, fp16, bf16) on b's
// clock (events: the device's time, not the host's), the fastest of reps
// runs after a warm-up, until deadline: what it measured by then. tag
// labels the rows (base and size). TF32's setting is restored afterwards.
func BenchLayers(b *Backend, tag [2]int, layers []backend.LayerShape, precisions []string, reps int, deadline time.Time) ([]LayerTime, error) {
	defer b.SetTF32(b.ConvTF32())
	var out []LayerTime
	for _, name := range precisions {
		dt, tf32, ok := benchPrecision(name)
		if !ok {
			return out, fmt.Errorf("backend/cuda: no precision %q to benchmark (tf32, fp32, fp16, bf16)", name)
		}
		b.SetTF32(tf32)
		for _, l := range layers {
			if time.Now().After(deadline) {
				return out, nil
			}
			s := l.Conv
			s.DT = dt
			rows, err := benchLayer(b, s, l.NoInputGrad, reps)
			if err != nil {
				return out, fmt.Errorf("%s %s: %w", l.Name, name, err)
			}
			for _, r := range rows {
				r.Base, r.Size, r.Layer, r.Count, r.Precision = tag[0], tag[1], l.Name, l.Count, name
				r.N, r.C, r.OC, r.H, r.W, r.K = s.N, s.C, s.OC, s.H, s.W, s.K
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// benchLayer times the three passes of convolution s on buffers of its
// own (filled with a constant: values do not change the time).
func benchLayer(b *Backend, s backend.ConvShape, noInputGrad bool, reps int) ([]LayerTime, error) {
	pool := memory.NewPool(b.Allocator(), memory.Options{})
	defer pool.EmptyCache()
	var bufs []*memory.Buffer
	defer func() {
		for _, buf := range bufs {
			pool.MustFree(buf)
		}
	}()
	view := func(dt backend.DType, n int) (backend.View, error) {
		buf, err := pool.Alloc(memory.Activations, int64(max(n, 1)*dt.Size()))
		if err != nil {
			return backend.View{}, err
		}
		bufs = append(bufs, buf)
		v := backend.View{Buf: buf, DT: dt, Len: n}
		b.Fill(v, 0.01)
		return v, nil
	}
	var v [7]backend.View
	sizes := [7]struct {
		dt backend.DType
		n  int
	}{{s.DT, s.InSize()}, {s.DT, s.WeightSize()}, {backend.Float32, s.OC}, {s.DT, s.OutSize()}, {s.DT, s.OutSize()},
		{s.DT, s.InSize()}, {backend.Float32, s.WeightSize()}}
	for i, sz := range sizes {
		var err error
		if v[i], err = view(sz.dt, sz.n); err != nil {
			return nil, err
		}
	}
	in, w, bias, out, dout, din, dw := v[0], v[1], v[2], v[3], v[4], v[5], v[6]
	ws, err := view(backend.Float32, b.ConvWorkspace(s))
	if err != nil {
		return nil, err
	}
	passes := []struct {
		name string
		run  func()
	}{
		{"forward", func() { b.Conv(s, out, in, w, bias, ws) }},
		{"backward-data", func() { b.ConvBack(s, din, backend.View{}, backend.View{}, dout, in, w, ws) }},
		{"backward-weight", func() { b.ConvBack(s, backend.View{}, dw, backend.View{}, dout, in, w, ws) }},
	}
	flops := 2 * float64(s.N) * float64(s.OH()*s.OW()) * float64(s.OC*s.C*s.K*s.K)
	var rows []LayerTime
	for _, p := range passes {
		if noInputGrad && p.name == "backward-data" {
			continue
		}
		p.run() // warm-up
		best := time.Duration(0)
		for range max(reps, 1) {
			from := b.Mark()
			p.run()
			to := b.Mark()
			d := b.Between(from, to)
			b.ReleaseMark(from)
			b.ReleaseMark(to)
			if best == 0 || (d > 0 && d < best) {
				best = d
			}
		}
		if err := b.Sync(); err != nil {
			return nil, err
		}
		ms := float64(best) / float64(time.Millisecond)
		row := LayerTime{Pass: p.name, MS: ms}
		if best > 0 {
			row.TFLOPs = flops / best.Seconds() / 1e12
		}
		rows = append(rows, row)
	}
	return rows, nil
}
