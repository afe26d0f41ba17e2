package predict

import (
	"fmt"

	"github.com/memunet/memunet/backend/noop"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/memory"
)

// Need is what predicting one batch takes.
type Need struct {
	N, H, W int // the batch: n images given to the model at h x w
	// PeakAllocated and PeakReserved are the pool's peaks for the batch in
	// a fresh pool, weights included, exactly as the real pool counts them:
	// a dry run on backend/noop.
	PeakAllocated, PeakReserved int64
	// Host is the memory beside the pool at the largest phase of the
	// batch (decoding, predicting, writing; see hostplan.go): the decoded
	// files, the scaled pictures, the normalized batch, the class maps, the
	// outputs being written, and the collector's slack. PlanBatch alone
	// counts the batch's buffers; Run's callers the rest.
	Host int64
}

// Total is what the batch takes from the host: the CPU backend's pool
// holds its reserved bytes in host memory.
func (n Need) Total() int64 { return n.PeakReserved + n.Host }

func (n Need) String() string {
	return fmt.Sprintf("about %s (the pool's planned peak reserved %s, host buffers %s)",
		memory.FormatBytes(n.Total()), memory.FormatBytes(n.PeakReserved), memory.FormatBytes(n.Host))
}

// PlanBatch predicts the memory of predicting n images given to the model
// at h x w, whose files (8-bit pictures) hold sourcePixels pixels in all,
// with overlays or not: the pool's by a dry run of the same forward pass
// on backend/noop (no memory, no arithmetic; an ensemble's every model's
// weights and passes, one after another), the host buffers at their
// largest phase (batchHost) with the collector's slack.
func (p *Predictor) PlanBatch(n, h, w int, sourcePixels int64, overlay bool) (Need, error) {
	if err := p.Net.CheckInput(p.Config.Model.InChannels, h, w); err != nil {
		return Need{}, err
	}
	dry, err := p.dryRun(n)
	if err != nil {
		return Need{}, err
	}
	defer dry.Close()
	for _, m := range dry.models() { // an ensemble's one after another, as Probabilities runs them
		logits, err := m.logits(nil, n, h, w)
		if err != nil {
			return Need{}, err
		}
		if len(dry.members) == 0 { // an ensemble's argmax is the host's, of the mean
			err = m.argmax(logits, nil)
		}
		logits.Release()
		if err != nil {
			return Need{}, err
		}
	}
	st := dry.Pool().Stats()
	// The files: 8-bit RGBA pictures (decoded in place), sourcePixels in
	// all; none where the pictures are in memory already.
	srcs := make([]source, n)
	for i := range srcs {
		srcs[i] = source{h: h, w: w}
		if per := sourcePixels / int64(n); per > 0 {
			srcs[i] = source{h: 1, w: int(per), decode: 4 * per, picture: 4 * per}
			if per == int64(h)*int64(w) {
				srcs[i].h, srcs[i].w = h, w
			}
		}
	}
	host := p.batchHost(srcs, h, w, Options{Overlay: overlay}, nil)
	return Need{N: n, H: h, W: w, PeakAllocated: st.Allocated.Peak, PeakReserved: st.Reserved.Peak, Host: host + gcSlack(host)}, nil
}

// dryRun is p's model (an ensemble's models) built on backend/noop, in a
// fresh pool of its own, for batches of batch: a plan's dry run.
func (p *Predictor) dryRun(batch int) (*Predictor, error) {
	dry, err := newPredictor(p.Config, noop.New(p.Device.Backend), p.precision, 0, batch)
	if err != nil {
		return nil, err
	}
	dry.depth = p.depth
	for _, m := range p.members {
		if err := dry.addMember(m.Config, nil); err != nil {
			dry.Close()
			return nil, err
		}
	}
	return dry, nil
}

// Limits are what a batch must fit in: the pool's capacity (0: none) and
// the memory this process may use (0: unknown), which Source names.
type Limits struct {
	Capacity, Available int64
	Source              string
	// margin says Available is already memlimit's share for automatic
	// choices (auto).
	margin bool
}

// HostLimits are a capacity and host's memory as Limits.
func HostLimits(capacity int64, host memlimit.Limit) Limits {
	return Limits{Capacity: capacity, Available: host.Bytes, Source: host.Source()}
}

// auto is l for an automatic choice (a tile, a batch, whole or by tiles):
// the host's memory cut to memlimit's margin, so that no plan it makes
// takes everything the process may use.
func (l Limits) auto() Limits {
	if l.Available > 0 && !l.margin {
		l.Available, l.margin = l.Available/memlimit.MarginDen*memlimit.MarginNum, true
	}
	return l
}

// hostText says what Available is: "6.00 GiB this process may use
// (cgroup memory.max ...)", or its margin's share of it.
func (l Limits) hostText() string {
	src := ""
	if l.Source != "" {
		src = " (" + l.Source + ")"
	}
	if l.margin {
		return fmt.Sprintf("%s, %d/%d of the memory this process may use%s", memory.FormatBytes(l.Available), memlimit.MarginNum, memlimit.MarginDen, src)
	}
	return fmt.Sprintf("%s this process may use%s", memory.FormatBytes(l.Available), src)
}

// largeNeed is the need above which predict says what a batch will take
// before it starts.
const largeNeed = 1 << 30

// exceeded says what of need passes which limit, or "".
func (l Limits) exceeded(need Need) string {
	switch {
	case l.Capacity > 0 && need.PeakAllocated > l.Capacity:
		return fmt.Sprintf("a pool peak of %s allocated, above its capacity %s (--capacity, else the checkpoint's memory.capacity)",
			memory.FormatBytes(need.PeakAllocated), memory.FormatBytes(l.Capacity))
	case l.Available > 0 && need.Total() > l.Available:
		return fmt.Sprintf("%s, above the %s", need, l.hostText())
	}
	return ""
}

// SizeError refuses an image too large to predict on this machine.
type SizeError struct {
	File         string
	H, W, TH, TW int
	Need         Need
	// Why is what the need is and the limit it passes; Advice what fits.
	Why, Advice string
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("predict: %s is %dx%d (height x width) and the model takes it at %dx%d: predicting it needs %s. %s",
		e.File, e.H, e.W, e.TH, e.TW, e.Why, e.Advice)
}

// sizeAdvice names the largest size, halving the image's sides, at which
// an h x w image fits lim; where the model's input size is fixed (by
// --resize or data.resize) only the file's own size can shrink.
func (p *Predictor) sizeAdvice(h, w int, s sizing, overlay bool, lim Limits) string {
	if s.fixed(p.Config) {
		return "The model takes every image at one size (--resize, else data.resize); give a smaller --resize, scale the file down, or predict on a machine with more memory."
	}
	for k := 1; k <= 8 && h>>k > 0 && w>>k > 0; k++ {
		sh, sw := h>>k, w>>k
		th, tw := s.modelSize(p.Config, sh, sw)
		nd, err := p.PlanBatch(1, th, tw, int64(sh)*int64(sw), overlay)
		if err == nil && lim.exceeded(nd) == "" {
			need := "about " + memory.FormatBytes(nd.Total())
			if lim.Capacity > 0 {
				need = "a pool peak of " + memory.FormatBytes(nd.PeakAllocated) + " allocated"
			}
			return fmt.Sprintf("Scale it down to %dx%d or smaller (that needs %s), or predict on a machine with more memory.", sh, sw, need)
		}
	}
	return "Even at 1/256 of its size it would not fit: predict on a machine with more memory."
}
