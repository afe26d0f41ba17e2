package predict

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/tiles"
)

// The host's side of a plan: what predicting one picture holds beside the
// pool, phase by phase (decoding its file, predicting, writing the
// outputs), the most of which is the plan's Host; and the process it runs
// in, whose collector is held to that plan (heldGC).

// source is the picture a plan predicts: its size in the file, and what
// reading that file holds (data.ImageInfo); both 0 for a picture already
// in memory (a dataset's sample, a volume's slice), which its owner holds.
type source struct {
	h, w            int
	decode, picture int64
}

func (s source) pixels() int64 { return int64(s.h) * int64(s.w) }

// pngWriteBytes is what encoding one PNG of rows of rowBytes holds beside
// its picture: the compressor's window and hash chains (compress/flate,
// about 1 MiB at any level), the encoder's filtered rows (five candidates
// and the previous row) and the file's write buffer (outdir.WriteFile).
func pngWriteBytes(rowBytes int64) int64 { return 1<<20 + 7*(rowBytes+1) + 1<<16 }

// writeExtra is what writing one picture's outputs holds beyond its class
// map and probabilities at the model's size h x w (which the caller
// holds): the class map scaled to the source's size, the written values
// (mask_values), the probabilities' scaled planes and a 16-bit plane of
// them, an overlay (and the picture's 8-bit copy it is drawn on, where the
// picture is 16-bit), a PNG encoder and --keep-largest's marks and
// queue (largestBytes).
func (p *Predictor) writeExtra(src source, h, w int, opts Options, values []int) int64 {
	k := int64(p.Config.Model.Classes)
	out := src.pixels()
	scaled := src.h != h || src.w != w
	host := pngWriteBytes(int64(src.w) * 2)
	if scaled {
		host += out
	}
	if values != nil {
		host += out * 2 // an 8- or 16-bit gray copy; 16 bits bound both
	}
	if opts.Probs != "" && scaled {
		host += k * out * 4
	}
	if opts.Probs == "png" {
		host += out * 2
	}
	if opts.Overlay {
		host += out * 4
		if src.picture > 4*out {
			host += out * 4
		}
	}
	if opts.keep != nil {
		host += largestBytes(out) // before the mask is written
	}
	return host
}

// tiledHost is what predicting one picture of src by tiles t at h x w (the
// model's size) holds beside the pool, at its largest phase: decoding the
// file; predicting (the picture and its scaled copy, the class map and the
// probabilities, a batch of tiles, their outputs (an ensemble's, a
// model's beside their mean), the blend band, weights and row); writing (the class map, the probabilities, the picture where
// an overlay is drawn on it, and writeExtra).
func (p *Predictor) tiledHost(t Tiling, l tiles.Layout, h, w int, src source, deep bool, opts Options, values []int) int64 {
	c, k := int64(p.Config.Model.InChannels), int64(p.Config.Model.Classes)
	px, tilePx := int64(h)*int64(w), int64(t.Batch)*int64(t.Tile)*int64(t.Tile)
	bpp := int64(4) // an RGBA picture
	if deep {
		bpp = 8
	}
	held := px // the class map
	if opts.Probs != "" {
		held += k * px * 4
	}
	predicting := src.picture + held + tilePx*c*4 + l.BandBytes(int(k), t.Batch) + int64(t.Tile*t.Tile)*8 + k*int64(w)*4
	if src.h != h || src.w != w {
		predicting += px * bpp
	}
	if opts.TTA {
		predicting += 3 * tilePx * (k + c) * 4 // mirrored inputs, their outputs and those flipped back
	} else {
		predicting += tilePx * k * 4 // the batch's logits or probabilities
	}
	if opts.ensemble {
		predicting += tilePx * k * 4 // a model's probabilities beside the mean
	}
	writing := held + p.writeExtra(src, h, w, opts, values)
	if opts.Overlay {
		writing += src.picture
	}
	return max(src.decode, predicting, writing)
}

// batchHost is what predicting files of srcs whole, together at h x w (the
// model's size), holds beside the pool, at its largest phase: decoding
// each (the pictures before it, and its decode); predicting (the pictures,
// those being scaled at once, the batch and its masks buffer, the classes,
// the probabilities and the flipped copies); writing one file's outputs
// (the pictures, classes and probabilities, and its writeExtra).
func (p *Predictor) batchHost(srcs []source, h, w int, opts Options, values []int) int64 {
	k := int64(p.Config.Model.Classes)
	n := int64(len(srcs))
	px := n * int64(h) * int64(w)
	var pictures, decoding, scaling int64
	for _, s := range srcs {
		decoding = max(decoding, pictures+s.decode)
		pictures += s.picture
		if s.h != h || s.w != w { // scaled by each sampling worker at once
			scaling = max(scaling, int64(h)*int64(w)*s.picture/max(s.pixels(), 1))
		}
	}
	scaling *= min(n, int64(runtime.GOMAXPROCS(0)))
	held := pictures + px // and the classes
	if opts.probabilistic() {
		held += k * px * 4
	}
	predicting := pictures + scaling + px + p.wholeHost(n, h, w, opts) // px: FillBatch's masks
	var writing int64
	for _, s := range srcs {
		writing = max(writing, held+p.writeExtra(s, h, w, opts, values))
	}
	return max(decoding, predicting, writing)
}

// wholeHost is what predicting n pictures whole at h x w holds on the
// host beside the pool: the normalized batch, the classes and, with
// probabilities (or flip averaging), those, the mirrored inputs and their
// probabilities and those flipped back; an ensemble's, a model's
// probabilities beside their mean.
func (p *Predictor) wholeHost(n int64, h, w int, opts Options) int64 {
	c, k := int64(p.Config.Model.InChannels), int64(p.Config.Model.Classes)
	px := n * int64(h) * int64(w)
	host := px*c*4 + px
	if opts.probabilistic() {
		host += k * px * 4
	}
	if opts.TTA {
		host += c*px*4 + 2*k*px*4
	}
	if opts.ensemble {
		host += k * px * 4 // a model's probabilities beside the mean
	}
	return host
}

// splitHost is what predicting a batch of n samples of a dataset split at
// h x w holds beside the pool: wholeHost's buffers, the batch's masks, the
// samples being read at once (a decoded picture and its converted copy,
// a mask: 10 bytes a pixel at most, one a worker), and writing one
// sample's outputs (an overlay's picture read again, and writeExtra).
func (p *Predictor) splitHost(n, h, w int, opts Options) int64 {
	px := int64(h) * int64(w)
	reading := min(int64(n), int64(runtime.GOMAXPROCS(0))) * px * 10
	held := p.wholeHost(int64(n), h, w, opts) + int64(n)*px
	writing := p.writeExtra(source{h: h, w: w}, h, w, opts, p.writtenValues(opts))
	if opts.Overlay {
		writing += px * 4
	}
	return held + max(reading, writing)
}

// gcSlack is the headroom the collector is given above the planned host
// buffers (heldGC): enough that a pass's garbage does not set it off at
// every allocation, small beside the plan.
func gcSlack(host int64) int64 { return 4<<20 + host/32 }

// heldGC holds the Go runtime's collector to a plan while Run predicts:
// its soft memory limit (debug.SetMemoryLimit) at the Go memory of the
// process as it stood plus the planned host buffers and their slack, so
// that garbage (each pass's outputs, a decoded file's buffers, the last
// file's pictures) is collected before the process outgrows its plan, not
// at twice the live heap (GOGC's default). The limit is the process's:
// Run sets it and puts back the one it found.
type heldGC struct {
	prev   int64 // the limit before
	goBase int64 // the Go runtime's memory after a full collection
	// base is the resident memory then outside a pool in host memory:
	// the program, the runtime, the model's host structures.
	base int64
	// poolOnHost says the pool's pages are host memory (the CPU).
	poolOnHost bool
}

// holdGC collects everything and gives free memory back, then measures
// the process as it stands, before a plan is held: its Go memory and its
// resident memory outside the pool.
func (p *Predictor) holdGC() *heldGC {
	debug.FreeOSMemory() // a full collection, then free memory given back
	_, onDevice := p.Device.Backend.(device.MemoryReporter)
	g := &heldGC{prev: debug.SetMemoryLimit(-1), goBase: goMemory(), poolOnHost: !onDevice}
	if now, _, ok := memlimit.Resident(); ok {
		g.base = now
		if g.poolOnHost {
			g.base -= p.Pool().Stats().Reserved.Current
		}
	}
	return g
}

// hold limits the collector to the process as it stood and need's host
// buffers, and returns the process's planned peak resident memory with
// need: the base, the pool's planned peak where it is host memory, and
// the host buffers (with the collector's slack, which need.Host holds).
func (g *heldGC) hold(need Need) int64 {
	if g == nil {
		return 0
	}
	debug.SetMemoryLimit(g.goBase + need.Host)
	rss := g.base + need.Host
	if g.poolOnHost {
		rss += need.PeakReserved
	}
	return rss
}

// release puts the collector's limit back as holdGC found it.
func (g *heldGC) release() {
	if g != nil {
		debug.SetMemoryLimit(g.prev)
	}
}

// goMemory is the memory the Go runtime holds from the system and has not
// given back: what its soft limit counts.
func goMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// writtenValues is the value each class is written as (the checkpoint's
// mask_values), nil where classes are written as their indices.
func (p *Predictor) writtenValues(opts Options) []int {
	if p.Checkpoint == nil || opts.ClassIndices {
		return nil
	}
	return p.Checkpoint.Manifest.MaskValues
}
