package cuda

import (
	"fmt"

	"github.com/memunet/memunet/backend"
)

// Segmented sums (ops.cu's norm_sums, loss_partials): a norm's
// statistics and gradient sums, and a bias gradient, are two float64 sums
// over each of its segments (a channel over the batch, or a sample's
// group), a loss's are two or four over the pixels (once, or per class),
// cut into chunks that many blocks sum at once, a finish kernel (or the
// host, for a loss) adding each segment's chunks in order. The chunks
// depend on the shape alone, so the sums are the same bits at any grid
// size (SetReduceGrid).

// The kinds of norm_sums (ops.cu's SUM_*).
const (
	sumBNStats = iota
	sumBNBack
	sumGNStats
	sumGNParams
	sumGNBack
	sumBias
)

// chunkValues is about how many values one block sums (16 a thread).
const chunkValues = 4096

// defaultReduceGrid is norm_sums's blocks: several a multiprocessor on
// the largest GPUs (132 on an H100/H200), each taking work items in turn.
const defaultReduceGrid = 1024

// reduceChunks cuts each of segs segments of length values into chunks of
// chunk values (a multiple of the block's 256 threads): about chunkValues
// each, fewer where the work items (segment, chunk) would be more than
// maxItems (the partials' room in the scratch).
func reduceChunks(segs, length, maxItems int) (chunk, chunks int) {
	if segs > maxItems {
		panic(fmt.Sprintf("backend/cuda: a reduction over %d channels, groups or classes; at most %d", segs, maxItems))
	}
	chunks = max(1, min((length+chunkValues-1)/chunkValues, maxItems/segs))
	chunk = ((length+chunks-1)/chunks + BlockThreads - 1) / BlockThreads * BlockThreads
	return chunk, max(1, (length+chunk-1)/chunk)
}

// SetReduceGrid sets how many blocks the segmented sums launch (0: the
// default): the results are the same bits whatever it is; tests show so.
func (b *Backend) SetReduceGrid(blocks int) { b.reduceGrid.Store(int64(max(0, blocks))) }

// reduceBlocks is the grid of a segmented sum (SetReduceGrid).
func (b *Backend) reduceBlocks() int {
	if g := int(b.reduceGrid.Load()); g > 0 {
		return g
	}
	return defaultReduceGrid
}

// sums launches norm_sums of kind over segs segments of length values
// and returns the partials' address and the chunks per segment, for the
// finish kernel. x and dy (may be none) are of type dt, stats and gamma
// (may be none) fp32; n, c, hw and g are the tensor's shape and groups.
func (b *Backend) sums(kind, segs, length int, dt backend.DType, x, dy, stats, gamma backend.View, n, c, hw, g int) (devicePtr, int) {
	return b.gatedSums(kind, segs, length, dt, x, dy, stats, gamma, n, c, hw, g, backend.View{})
}

// gatedSums is sums with sumBNBack's dy through a ReLU's gate: relu is
// its mask (Uint8) or its output (dt), none for no gate.
func (b *Backend) gatedSums(kind, segs, length int, dt backend.DType, x, dy, stats, gamma backend.View, n, c, hw, g int, relu backend.View) (devicePtr, int) {
	chunk, chunks := reduceChunks(segs, length, maxPartials)
	items := segs * chunks
	partials := b.scratchPtr(partialsOffset, 16*items)
	b.launchGrid(KNormSums, min(items, b.reduceBlocks()), 1, partials, kind, ptr(x, dt), ptr(dy, dt), ptr(stats, backend.Float32),
		ptr(gamma, backend.Float32), dt, n, c, hw, g, chunk, chunks, ptr(relu, relu.DT), relu.DT == backend.Uint8)
	return partials, chunks
}

// coefs is scratch for n float32 coefficients.
func (b *Backend) coefs(n int) devicePtr {
	if n > maxCoefs {
		panic(fmt.Sprintf("backend/cuda: %d norm coefficients; at most %d", n, maxCoefs))
	}
	return b.scratchPtr(coefOffset, 4*n)
}

// biasGrad adds the sums of dout (N, C, P; of any float type) over (n, p)
// to dbias.
func (b *Backend) biasGrad(dbias, dout backend.View, n, c, p int) {
	checkLen(dbias, c)
	partials, chunks := b.sums(sumBias, c, n*p, dout.DT, backend.View{}, dout, backend.View{}, backend.View{}, n, c, p, 1)
	b.launch(KAddSums, c, ptr(dbias, backend.Float32), devicePtr{}, partials, c, chunks)
}

// ---- norms ----

func (b *Backend) BatchNorm(a backend.NormArgs, out, in, stats backend.View, reuse, update bool) {
	coef := b.batchNormCoefs(a, out, in, stats, reuse, update)
	b.launch(KBatchNormApply, (a.Len()+7)/8, ptr(out, in.DT), ptr(in, in.DT), coef, in.DT, a.N, a.C, a.H*a.W)
}

// BatchNormReLU is BatchNorm's statistics, then one pass that normalizes,
// applies the ReLU and, unless mask is none, writes its mask.
func (b *Backend) BatchNormReLU(a backend.NormArgs, out, mask, in, stats backend.View, reuse, update bool) {
	coef := b.batchNormCoefs(a, out, in, stats, reuse, update)
	if !mask.None() {
		checkLen(mask, (a.Len()+7)/8)
	}
	b.launch(KBatchNormReLUApply, (a.Len()+7)/8, ptr(out, in.DT), ptr(mask, backend.Uint8), ptr(in, in.DT), coef, in.DT, a.N, a.C, a.H*a.W)
}

// batchNormCoefs computes the batch's statistics into stats (unless reuse)
// and each channel's scale and shift into scratch, whose address it
// returns for the pass that applies them.
func (b *Backend) batchNormCoefs(a backend.NormArgs, out, in, stats backend.View, reuse, update bool) devicePtr {
	if reuse && update {
		panic("backend/cuda: batch norm: running statistics cannot be updated from reused statistics")
	}
	checkLen(out, a.Len(), in, a.Len(), stats, a.StatsLen(false))
	dt, hw := in.DT, a.H*a.W
	partials, chunks := devicePtr{}, 0
	if !reuse {
		partials, chunks = b.sums(sumBNStats, a.C, a.N*hw, dt, in, backend.View{}, backend.View{}, backend.View{}, a.N, a.C, hw, 1)
	}
	coef := b.coefs(2 * a.C)
	b.launch(KBatchNormFinish, a.C, ptr(stats, backend.Float32), coef, partials, ptr(in, dt), ptr(a.Gamma, backend.Float32),
		ptr(a.Beta, backend.Float32), ptr(a.RunningMean, backend.Float32), ptr(a.RunningVar, backend.Float32), dt,
		a.N, a.C, hw, a.Eps, a.Momentum, reuse, update, chunks)
	return coef
}

func (b *Backend) BatchNormEval(a backend.NormArgs, out, in backend.View) {
	checkLen(out, a.Len(), in, a.Len())
	b.launch(KBatchNormEval, a.Len(), ptr(out, in.DT), ptr(in, in.DT), ptr(a.Gamma, backend.Float32), ptr(a.Beta, backend.Float32),
		ptr(a.RunningMean, backend.Float32), ptr(a.RunningVar, backend.Float32), in.DT, a.N, a.C, a.H*a.W, a.Eps)
}

// BatchNormBack sums over the batch before din is written, so din may be
// dout.
func (b *Backend) BatchNormBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats backend.View) {
	b.batchNormBack(a, din, dgamma, dbeta, dout, in, stats, backend.View{})
}

// BatchNormReLUBack is BatchNormBack of the ReLU's gradient, the gate
// (relu: its mask, or its output) applied as the sums and the apply read
// dout: no pass writes the gated gradient between.
func (b *Backend) BatchNormReLUBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats, relu backend.View) {
	if relu.DT == backend.Uint8 {
		checkLen(relu, (a.Len()+7)/8)
	} else {
		checkLen(relu, a.Len())
		ptr(relu, in.DT) // the output's type is the tensors'
	}
	b.batchNormBack(a, din, dgamma, dbeta, dout, in, stats, relu)
}

// batchNormBack is BatchNormBack with dout through relu's gate (none: no
// gate).
func (b *Backend) batchNormBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats, relu backend.View) {
	checkLen(din, a.Len(), dout, a.Len(), in, a.Len(), stats, a.StatsLen(false))
	dt, hw := in.DT, a.H*a.W
	partials, chunks := b.gatedSums(sumBNBack, a.C, a.N*hw, dt, in, dout, stats, backend.View{}, a.N, a.C, hw, 1, relu)
	coef := b.coefs(3 * a.C)
	b.launch(KBatchNormBackFinish, a.C, coef, ptr(dgamma, backend.Float32), ptr(dbeta, backend.Float32), partials,
		ptr(stats, backend.Float32), ptr(a.Gamma, backend.Float32), a.N, a.C, hw, chunks)
	b.launch(KBatchNormBackApply, (a.Len()+7)/8, ptr(din, dt), ptr(dout, dt), ptr(in, dt), coef, ptr(stats, backend.Float32),
		dt, a.N, a.C, hw, ptr(relu, relu.DT), relu.DT == backend.Uint8)
}

func (b *Backend) GroupNorm(a backend.NormArgs, out, in, stats backend.View, reuse bool) {
	checkLen(out, a.Len(), in, a.Len(), stats, a.StatsLen(true))
	dt, hw, groups := in.DT, a.H*a.W, a.N*a.Groups
	if !reuse {
		partials, chunks := b.sums(sumGNStats, groups, a.C/a.Groups*hw, dt, in, backend.View{}, backend.View{}, backend.View{},
			a.N, a.C, hw, a.Groups)
		b.launch(KGroupNormFinish, groups, ptr(stats, backend.Float32), partials, ptr(in, dt), dt, a.N, a.C, hw, a.Groups,
			a.Eps, chunks)
	}
	b.launch(KGroupNormApply, a.Len(), ptr(out, dt), ptr(in, dt), ptr(stats, backend.Float32), ptr(a.Gamma, backend.Float32),
		ptr(a.Beta, backend.Float32), dt, a.N, a.C, hw, a.Groups)
}

// GroupNormBack sums dgamma and dbeta per channel and din's sums per
// (sample, group) before din is written, so din may be dout.
func (b *Backend) GroupNormBack(a backend.NormArgs, din, dgamma, dbeta, dout, in, stats backend.View) {
	checkLen(din, a.Len(), dout, a.Len(), in, a.Len(), stats, a.StatsLen(true))
	dt, hw, groups := in.DT, a.H*a.W, a.N*a.Groups
	partials, chunks := b.sums(sumGNParams, a.C, a.N*hw, dt, in, dout, stats, backend.View{}, a.N, a.C, hw, a.Groups)
	b.launch(KAddSums, a.C, ptr(dbeta, backend.Float32), ptr(dgamma, backend.Float32), partials, a.C, chunks)
	partials, chunks = b.sums(sumGNBack, groups, a.C/a.Groups*hw, dt, in, dout, stats, a.Gamma, a.N, a.C, hw, a.Groups)
	coef := b.coefs(2 * groups)
	b.launch(KGroupNormBackFinish, groups, coef, partials, ptr(stats, backend.Float32), a.N, a.C, hw, a.Groups, chunks)
	b.launch(KGroupNormBackApply, a.Len(), ptr(din, dt), ptr(dout, dt), ptr(in, dt), coef, ptr(stats, backend.Float32),
		ptr(a.Gamma, backend.Float32), dt, a.N, a.C, hw, a.Groups)
}
