package predict

import (
	"fmt"

	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/memory"
)

// Need is what predicting one batch takes.
type Need struct {
	N, H, W int // the batch: n images given to the model at h x w
	// PeakAllocated and PeakReserved are the pool's peaks for the batch in
	// a fresh pool, weights included, exactly as the real pool counts them:
	// a dry run on backend/noop.
	PeakAllocated, PeakReserved int64
	// Host is the memory beside the pool: the decoded files, the scaled
	// pictures, the normalized batch, the class maps and, with overlays,
	// the blended pictures.
	Host int64
}

// Total is what the batch takes from the host: the CPU backend's pool
// holds its reserved bytes in host memory.
func (n Need) Total() int64 { return n.PeakReserved + n.Host }

func (n Need) String() string {
	return fmt.Sprintf("about %s (the pool's planned peak reserved %s, images and masks %s)",
		memory.FormatBytes(n.Total()), memory.FormatBytes(n.PeakReserved), memory.FormatBytes(n.Host))
}

// PlanBatch predicts the memory of predicting n images given to the model
// at h x w, whose files hold sourcePixels pixels in all, with overlays or
// not: the pool's by a dry run of the same forward pass on backend/noop (no
// memory, no arithmetic), the host buffers by their sizes.
func (p *Predictor) PlanBatch(n, h, w int, sourcePixels int64, overlay bool) (Need, error) {
	if err := p.Net.CheckInput(p.Config.Model.InChannels, h, w); err != nil {
		return Need{}, err
	}
	dry, err := newPredictor(p.Config, noop.New(p.Device.Backend), p.precision, 0, n)
	if err != nil {
		return Need{}, err
	}
	defer dry.Close()
	logits, err := dry.logits(nil, n, h, w)
	if err != nil {
		return Need{}, err
	}
	_, err = dry.classes(logits)
	logits.Release()
	if err != nil {
		return Need{}, err
	}
	st := dry.Pool().Stats()
	pixels := int64(n) * int64(h) * int64(w)
	c := int64(p.Config.Model.InChannels)
	// RGBA files + their class maps; RGBA scaled pictures, float32 batch,
	// the mask buffer and the downloaded classes.
	host := sourcePixels*(4+1) + pixels*(4+4*c+1+1)
	if overlay {
		host += sourcePixels * 4
	}
	return Need{N: n, H: h, W: w, PeakAllocated: st.Allocated.Peak, PeakReserved: st.Reserved.Peak, Host: host}, nil
}
