package predict

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/model"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/tiles"
)

// A 3D UNet (model.dims 3) predicts a NIfTI volume by a sliding window
// in three dimensions, streamed along z (the file's last, slowest axis):
//
//   - Windows of D x H x W (z, y, x; volumeWindow) step by
//     round(side*(1-overlap)) along each axis (Options.Overlap), laid out
//     along each axis as package tiles lays tiles along a side: a volume
//     side shorter than the window, and the rest past the last full
//     step, is padded, by reflecting the volume (as tiles reflect an
//     image), half before and half after.
//   - Each window's logits (an ensemble's: its models' mean softmax
//     probabilities, see ensemble.go) are weighed by a Gaussian centred
//     on it, sigma side/8 along each axis, 1 at its centre (nnU-Net's
//     importance map; Options.Blend constant: 1 everywhere), and summed
//     per voxel.
//     The weighted mean is that sum over the weights' sum, a positive
//     factor per voxel that does not change which class is largest, so
//     the argmax is taken of the sum itself.
//   - The windows go row by row along z. Before a row, the z-slices it
//     reads are read from the file (data.VolumeStream: slice by slice,
//     never the volume) and windowed to 16 bits as data.source nifti
//     windows slices; each window is normalized as data.Window normalizes
//     a tile. A case of several modalities (CASE_0000.nii.gz ..., for a
//     checkpoint trained on them; see cases.go) is read from one stream
//     a modality in step, channel ch from modality ch windowed or
//     z-scored by its own intensities; a single volume gives a model of C
//     channels C equal ones, as a gray image does, each by its data.mean
//     and data.std. After a row, every z-slice no later row touches
//     (those before the next row's first) is finished: its classes are
//     written to the mask (data.MaskVolumeWriter, the input's header
//     geometry, channel 0's for a case) and, with Options.References,
//     counted against the reference's slice.
//
// So the host holds a slab: the input slices of one row of windows (16
// bits a voxel, per modality), the weighted sums of its classes x D x H x
// W voxels (float32), a window and its logits; never the volume.
// volumeHost counts it.

// VolumeTiling is how a volume was predicted by a 3D UNet: windows of
// Window [D, H, W] (z, y, x), overlapping by Overlap, blended by Blend.
type VolumeTiling struct {
	Window  [3]int  `json:"window"`
	Overlap float64 `json:"overlap"`
	Blend   string  `json:"blend"`
	// Windows is how many cover the volume; Slab the z-slices of weighted
	// sums (classes x slab x H x W float32) held at once.
	Windows int `json:"windows"`
	Slab    int `json:"slab"`
}

func (t VolumeTiling) String() string {
	return fmt.Sprintf("%d windows of %dx%dx%d, overlap %g, %s blend, a slab of %d z-slices", t.Windows, t.Window[0], t.Window[1], t.Window[2], t.Overlap, t.Blend, t.Slab)
}

// axisLayout is the windows along one axis of n voxels: side long,
// stride apart, count of them, the first starting before voxels before
// voxel 0 (package tiles' rule along a side).
type axisLayout struct {
	n, side, stride, count, before int
}

func newAxisLayout(n, side int, overlap float64) (axisLayout, error) {
	l, err := tiles.New(n, 1, side, overlap) // its rows are this axis
	if err != nil {
		return axisLayout{}, err
	}
	return axisLayout{n: n, side: side, stride: l.Stride, count: l.Rows, before: l.PadTop}, nil
}

// origin is window i's first voxel (negative where it starts in the
// padding).
func (a axisLayout) origin(i int) int { return i*a.stride - a.before }

// reflect maps i onto [0, n) as data.Window pads tiles.
func reflect(i, n int) int { return data.ReflectIndex(i, n) }

// reads is the voxels window i reads along the axis, reflected into it:
// [lo, hi].
func (a axisLayout) reads(i int) (lo, hi int) {
	lo, hi = a.n, -1
	for d := range a.side {
		r := reflect(a.origin(i)+d, a.n)
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi
}

// weights is a window's weight along the axis: a Gaussian of sigma
// side/8, 1 at the centre (tiles.Weights along one side), or 1s.
func (a axisLayout) weights(blend string) []float32 {
	w := make([]float32, a.side)
	if blend != tiles.Gaussian {
		for i := range w {
			w[i] = 1
		}
		return w
	}
	sigma := float64(a.side) / 8
	g := func(i int) float64 {
		d := float64(i) + 0.5 - float64(a.side)/2
		return math.Exp(-d * d / (2 * sigma * sigma))
	}
	top := g(a.side / 2)
	for i := range w {
		w[i] = float32(g(i) / top)
	}
	return w
}

// volumeLayout is the windows over a volume: z, y and x, and the slabs
// they take.
type volumeLayout struct {
	z, y, x axisLayout
	// keep[i] is the first input z-slice held while row i is predicted
	// (the least any row from i on reads); inDepth the most input slices
	// held at once, accDepth the most z-slices of weighted sums.
	keep              []int
	inDepth, accDepth int
}

func newVolumeLayout(dims [3]int, window [3]int, overlap float64) (volumeLayout, error) {
	var l volumeLayout
	var err error
	if l.z, err = newAxisLayout(dims[2], window[0], overlap); err != nil {
		return l, err
	}
	if l.y, err = newAxisLayout(dims[1], window[1], overlap); err != nil {
		return l, err
	}
	if l.x, err = newAxisLayout(dims[0], window[2], overlap); err != nil {
		return l, err
	}
	l.keep = make([]int, l.z.count)
	first := l.z.n
	for i := l.z.count - 1; i >= 0; i-- {
		lo, _ := l.z.reads(i)
		first = min(first, lo)
		l.keep[i] = first
	}
	for i := range l.z.count {
		_, hi := l.z.reads(i)
		l.inDepth = max(l.inDepth, hi-l.keep[i]+1)
	}
	l.accDepth = min(l.z.side, l.z.n)
	return l, nil
}

// count is the number of windows.
func (l volumeLayout) count() int { return l.z.count * l.y.count * l.x.count }

// volumeWindow is a 3D UNet's window [D, H, W] (z, y, x): opts.Tile N
// (--tile, else predict.tile) N on every axis; else the checkpoint's
// data.patch where it holds the three sides trained on, [D, H, W]; else
// data.size on every axis (the synthetic set's volumes). Each side is
// rounded up to a multiple of its axis's pooling product. --tile auto
// and none are the default here: the window is the patch the model was
// trained on, and a volume of any size streams through it.
func (p *Predictor) volumeWindow(opts Options) ([3]int, error) {
	cfg := p.Config
	var w [3]int
	switch pt := cfg.Data.Patch; {
	case opts.Tile != "" && opts.Tile != TileAuto && opts.Tile != TileNone:
		n, err := strconv.Atoi(opts.Tile)
		if err != nil || n < 1 || n > data.MaxResizeSize {
			return w, fmt.Errorf("--tile %q: a 3D UNet's window side (on every axis), from 1 to %d, e.g. 64; or leave it out for the patch it trained on", opts.Tile, data.MaxResizeSize)
		}
		w = [3]int{n, n, n}
	case len(pt) == 3:
		w = [3]int{pt[0], pt[1], pt[2]}
	default:
		n := max(cfg.Data.Size, 1)
		w = [3]int{n, n, n}
	}
	f := cfg.Model.Reduction() // the poolings' product along each axis
	for i, m := range [3]int{f.D, f.H, f.W} {
		w[i] = max(1, (w[i]+m-1)/m) * m
	}
	return w, nil
}

// volumeLogits runs one window (C x D x H x W normalized) through the 3D
// UNet and downloads its logits (K x D x H x W) into dst where they are
// float32 (else a new slice). A dry run (planVolume) passes nil for
// both: nothing is uploaded or downloaded.
func (p *Predictor) volumeLogits(dst, window []float32, d, h, w int) ([]float32, error) {
	x, err := model.NewVolume(p.Device, memory.Activations, backend.Float32, 1, p.Config.Model.InChannels, d, h, w)
	if err != nil {
		return nil, err
	}
	defer x.Release()
	if window != nil {
		x.Write(window)
	}
	logits, err := p.Net.Forward(p.env, x)
	if err != nil {
		return nil, err
	}
	defer logits.Release()
	if dst == nil {
		return nil, nil
	}
	if v := logits.View(); v.DT == backend.Float32 && v.Len == len(dst) {
		backend.DownloadFloat32Into(p.Device.Backend, dst, v)
		return dst, p.Device.Backend.Sync()
	}
	out := backend.DownloadFloat32(p.Device.Backend, logits.View())
	return out, p.Device.Backend.Sync()
}

// windowOutputs is what streamVolume blends of one window (volumeLogits'):
// its logits, or an ensemble's the mean of its models' softmax
// probabilities, in mean (K x D x H x W), with dst each model's logits.
func (p *Predictor) windowOutputs(dst, mean, window []float32, d, h, w int) ([]float32, error) {
	if len(p.members) == 0 {
		return p.volumeLogits(dst, window, d, h, w)
	}
	clear(mean)
	for i, m := range p.models() {
		out, err := m.volumeLogits(dst, window, d, h, w)
		if err != nil {
			return nil, err
		}
		softmaxPlanes(out, 1, p.Config.Model.Classes, d*h*w)
		meanInto(mean, out, i == len(p.members), p.Ensemble())
	}
	return mean, nil
}

// planVolume plans predicting a volume of dims [x, y, z] by window [D, H,
// W]: the pool's peaks for one window by a dry run on backend/noop, and
// beside it on the host the slab volumeHost counts, with the collector's
// slack. The input is streams files (a case's modalities, or one
// volume), sliceBytes the stored bytes of one z-slice of them all, and
// refBytes of the reference's (0: none); keep says --keep-largest holds
// the volume's classes whole (streamMask).
func (p *Predictor) planVolume(dims, window [3]int, overlap float64, streams int, sliceBytes, refBytes int64, keep bool) (Need, volumeLayout, error) {
	l, err := newVolumeLayout(dims, window, overlap)
	if err != nil {
		return Need{}, l, err
	}
	if err := p.Net.CheckVolume(p.Config.Model.InChannels, window[0], window[1], window[2]); err != nil {
		return Need{}, l, err
	}
	dry, err := p.dryRun(1)
	if err != nil {
		return Need{}, l, err
	}
	defer dry.Close()
	for _, m := range dry.models() { // an ensemble's one after another (windowOutputs)
		if _, err := m.volumeLogits(nil, nil, window[0], window[1], window[2]); err != nil {
			return Need{}, l, err
		}
	}
	st := dry.Pool().Stats()
	host := p.volumeHost(l, streams, sliceBytes, refBytes)
	if keep { // the volume's classes, whole, and KeepLargest's marks and queue
		n := int64(dims[0]) * int64(dims[1]) * int64(dims[2])
		host += n + largestBytes(n)
	}
	return Need{N: 1, H: window[1], W: window[2], PeakAllocated: st.Allocated.Peak, PeakReserved: st.Reserved.Peak, Host: host + gcSlack(host)}, l, nil
}

// volumeHost is what predicting a volume by l holds on the host beside
// the pool, all at once: the input streams, one a modality (each its
// slice of stored voxels, sliceBytes in all, read buffer and gzip
// window); the input slabs, one a stream (inDepth z-slices windowed to
// 16 bits); the weighted sums (accDepth
// z-slices of K planes); a window, its logits (and their float32 copy
// where the model computes in another precision; an ensemble's mean
// probabilities beside them), the weights and
// reflected indices; a finished slice's classes and labels, the writer
// (an encoded slice, its buffer and compressor) and the output file's
// buffer (outdir.WriteFile); with a reference, its stream and slice.
// The first passes that find each volume's min and max hold a stream
// alone, less than this.
func (p *Predictor) volumeHost(l volumeLayout, streams int, sliceBytes, refBytes int64) int64 {
	c, k := int64(p.Config.Model.InChannels), int64(p.Config.Model.Classes)
	px := int64(l.y.n) * int64(l.x.n)
	win := int64(l.z.side) * int64(l.y.side) * int64(l.x.side)
	n := int64(streams)
	host := n*data.VolumeStreamBytes + sliceBytes
	host += n * int64(l.inDepth) * px * 2
	host += int64(l.accDepth) * k * px * 4
	host += c*win*4 + k*win*4
	if p.precision != backend.Float32 {
		host += k * win * 4
	}
	if len(p.members) > 0 {
		host += k * win * 4 // the mean probabilities (windowOutputs)
	}
	host += int64(l.z.side+l.y.side+l.x.side) * 4 // weights
	host += int64(l.y.side+l.x.side) * 8          // reflected indices
	host += px + 2*px + data.MaskWriterBytes + 2*px + 1<<16
	if refBytes > 0 {
		host += data.VolumeStreamBytes + refBytes + px
	}
	return host
}

// openCase opens one stream a modality of a case (sizeFiles: channel 0
// first), else the one volume, with their slices' bytes; the streams
// opened are returned on error too, for the caller to close.
func openCase(f sizedFile) (ins []*data.VolumeStream, sliceBytes int64, err error) {
	for _, path := range f.volumes() {
		in, err := data.OpenVolumeStream(path)
		if err != nil {
			return ins, 0, fmt.Errorf("predict: %w", err)
		}
		ins = append(ins, in)
		sliceBytes += in.SliceBytes()
		if d, d0 := in.Volume.Dims, ins[0].Volume.Dims; d != d0 {
			return ins, 0, fmt.Errorf("predict: %s is %dx%dx%d voxels but %s is %dx%dx%d; a case's modalities must have one size", path, d[0], d[1], d[2], f.path, d0[0], d0[1], d0[2])
		}
	}
	return ins, sliceBytes, nil
}

// openReference opens the reference mask of volume v (opts.References),
// with its slice's bytes; nil without references.
func openReference(f sizedFile, v *data.Volume, opts Options) (*data.VolumeStream, int64, error) {
	if opts.References == "" {
		return nil, 0, nil
	}
	path, err := referenceFor(f.path, opts.References)
	if err != nil {
		return nil, 0, err
	}
	ref, err := data.OpenVolumeStream(path)
	if err != nil {
		return nil, 0, fmt.Errorf("predict: --references: %w", err)
	}
	if ref.Volume.Dims != v.Dims {
		ref.Close()
		return nil, 0, fmt.Errorf("predict: --references: %s is %dx%dx%d and the volume %s %dx%dx%d; a reference mask has its volume's voxels",
			path, ref.Volume.Dims[0], ref.Volume.Dims[1], ref.Volume.Dims[2], f.path, v.Dims[0], v.Dims[1], v.Dims[2])
	}
	return ref, ref.SliceBytes(), nil
}

// predictVolume3D predicts a NIfTI volume (or a case of several
// modalities, f.channels) with a 3D UNet, streamed slab by slab (see the
// top of this file), into a mask volume of the same name (the case's)
// and extension with the volume's header geometry; with
// opts.References, scored against its reference mask (Output.Score).
// The volume's plan (planVolume) must fit lim before a voxel is read.
func (p *Predictor) predictVolume3D(f sizedFile, journal *outdir.Journal, opts Options, lim Limits, note io.Writer, rep *Report) error {
	switch {
	case opts.Overlay || opts.Probs != "":
		return fmt.Errorf("predict: %s: --overlay and --probs apply to image files; a NIfTI volume's output is its mask volume", f.path)
	case opts.TTA:
		return fmt.Errorf("predict: %s: --tta (flip averaging) applies to 2D models; a 3D UNet predicts a volume without it", f.path)
	}
	window, err := p.volumeWindow(opts)
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	ins, sliceBytes, err := openCase(f)
	defer func() {
		for _, in := range ins {
			in.Close()
		}
	}()
	if err != nil {
		return err
	}
	v := ins[0].Volume
	ref, refBytes, err := openReference(f, v, opts)
	if err != nil {
		return err
	}
	if ref != nil {
		defer ref.Close()
	}
	need, l, err := p.planVolume(v.Dims, window, opts.Overlap, len(ins), sliceBytes, refBytes, opts.keep != nil)
	if err != nil {
		return fmt.Errorf("predict: %s (%dx%dx%d) by windows of %dx%dx%d: %w", f.path, v.Dims[0], v.Dims[1], v.Dims[2], window[0], window[1], window[2], err)
	}
	t := VolumeTiling{Window: window, Overlap: opts.Overlap, Blend: opts.Blend, Windows: l.count(), Slab: l.accDepth}
	why, fix := lim.exceeded(need), "raise --capacity"
	if why == "" && lim.Capacity > 0 && need.PeakReserved > lim.Capacity {
		why = fmt.Sprintf("a pool peak of %s reserved, above its capacity %s", memory.FormatBytes(need.PeakReserved), memory.FormatBytes(lim.Capacity))
	}
	if lim.Available > 0 && need.Total() > lim.Available {
		// The host's memory: --capacity bounds the pool only, and a slab's
		// buffers grow with the volume's x-y slice.
		fix = "crop or resample the volume"
	}
	if why != "" {
		return fmt.Errorf("predict: %s (%dx%dx%d) by windows of %dx%dx%d needs %s; give a smaller window (--tile N), %s or free memory",
			f.path, v.Dims[0], v.Dims[1], v.Dims[2], window[0], window[1], window[2], why, fix)
	}
	rss := p.held.hold(need)
	rep.plan(need, rss)
	what := f.path // a case: its channel 0 with the others' names
	for _, in := range ins[1:] {
		what += ", " + filepath.Base(in.Path)
	}
	fmt.Fprintf(note, "predict: %s (%dx%dx%d) by %s: planned pool peak %s allocated, host %s%s\n",
		what, v.Dims[0], v.Dims[1], v.Dims[2], t, memory.FormatBytes(need.PeakAllocated), memory.FormatBytes(need.Host), rssText(rss))
	// A first pass over each file finds its min and max where
	// data.nifti.window does not give the intensity window (and its mean
	// and std for zscore): each modality its own, as training's.
	norms := make([]data.Intensity, len(ins))
	for i, in := range ins {
		if norms[i], err = data.StreamIntensity(in.Path, p.Config.Data.NIfTI); err != nil {
			return fmt.Errorf("predict: %w", err)
		}
	}
	var sc *volumeScorer
	if ref != nil {
		if sc, err = p.newVolumeScorer(ref); err != nil {
			return err
		}
	}
	name := f.stem + ".nii"
	if v.Gzip {
		name += ".gz"
	}
	if err := journal.Claim(name); err != nil {
		return err
	}
	values := p.writtenValues(opts)
	top := uint16(p.Config.Model.Classes - 1)
	for _, m := range values {
		top = max(top, uint16(m))
	}
	path := filepath.Join(journal.Dir(), name)
	var kept int64
	err = outdir.WriteFile(path, func(w io.Writer) error {
		out, err := data.NewMaskVolumeWriter(w, v, top, v.Gzip)
		if err != nil {
			return err
		}
		if kept, err = p.streamMask(ins, l, norms, opts, func(z int, classes []uint8, labels []uint16) error {
			for i, c := range classes {
				labels[i] = uint16(c)
				if values != nil {
					labels[i] = uint16(values[c])
				}
			}
			if sc != nil {
				if err := sc.add(z, classes); err != nil {
					return err
				}
			}
			return out.WriteSlice(labels)
		}); err != nil {
			return err
		}
		return out.Close()
	})
	if err != nil {
		return fmt.Errorf("predict: %s: %w", f.path, err)
	}
	o := Output{Input: f.path, Channels: f.channels, Mask: name, Volume: &t, KeptLargest: kept}
	if sc != nil {
		o.Score = sc.score()
	}
	rep.Outputs = append(rep.Outputs, o)
	return nil
}

// streamMask hands each z-slice's classes to write in order, as
// streamVolume does (write gets a labels buffer of the slice's size); with
// --keep-largest (opts.keep) it holds the volume's classes until the last
// slice, keeps the largest components of the classes asked for (6-
// connected) and then writes them, and returns the voxels that changed.
func (p *Predictor) streamMask(ins []*data.VolumeStream, l volumeLayout, norms []data.Intensity, opts Options, write func(z int, classes []uint8, labels []uint16) error) (int64, error) {
	if opts.keep == nil {
		return 0, p.streamVolume(ins, l, norms, opts.Blend, write)
	}
	dims := [3]int{l.x.n, l.y.n, l.z.n}
	px := dims[0] * dims[1]
	whole := make([]uint8, px*dims[2])
	if err := p.streamVolume(ins, l, norms, opts.Blend, func(z int, classes []uint8, _ []uint16) error {
		copy(whole[z*px:(z+1)*px], classes)
		return nil
	}); err != nil {
		return 0, err
	}
	kept, err := opts.keepLargest(whole, dims, p.Config.Data.Background)
	if err != nil {
		return 0, err
	}
	labels := make([]uint16, px)
	for z := range dims[2] {
		if err := write(z, whole[z*px:(z+1)*px], labels); err != nil {
			return 0, err
		}
	}
	return kept, nil
}

// streamVolume predicts the volume ins by the windows of l, and hands
// each z-slice's classes (y rows of x, x fastest) to emit as soon as no
// later window touches it, in order, with a labels buffer of the slice's
// size for emit to use; both are valid during the call. ins are a
// case's modalities, read in step, channel ch from ins[ch]; or one
// volume, given to every channel (as a gray image is). Stream i's
// voxels are windowed by norms[i]'s [Lo, Hi] and normalized as the 2D
// slice path normalizes them (data.source nifti's 16 bits, then
// data.Window's (v-Mean)/Std and data.mean/data.std channel by channel,
// or with zscore the stream's own Affine).
func (p *Predictor) streamVolume(ins []*data.VolumeStream, l volumeLayout, norms []data.Intensity, blend string, emit func(z int, classes []uint8, labels []uint16) error) error {
	c := p.Config.Model.InChannels
	if len(ins) != 1 && len(ins) != c || len(norms) != len(ins) {
		return fmt.Errorf("predict: %d volumes for a model of %d channels", len(ins), c)
	}
	from := func(ch int) int { return min(ch, len(ins)-1) } // the stream channel ch reads
	a, b, err := data.NormCoefficients(p.Config.Data.Mean, p.Config.Data.Std, c)
	if err != nil {
		return err
	}
	for ch := range c {
		if norm := norms[from(ch)]; norm.ZScore { // by the volume's own statistics (data.mean and data.std are the defaults)
			if a == nil {
				a, b = slices.Repeat([]float32{1}, c), make([]float32, c)
			}
			a[ch], b[ch] = norm.Affine()
		}
	}
	k := p.Config.Model.Classes
	X, Y, Z := l.x.n, l.y.n, l.z.n
	px := X * Y
	td, th, tw := l.z.side, l.y.side, l.x.side
	tv := td * th * tw
	slabLen := l.inDepth * px
	slab := make([]uint16, len(ins)*slabLen) // stream i's input z-slice z at slot i*inDepth + z % inDepth
	acc := make([]float32, l.accDepth*k*px)
	window := make([]float32, c*tv)
	logits := make([]float32, k*tv)
	var mean []float32 // an ensemble's mean probabilities of a window
	if len(p.members) > 0 {
		mean = make([]float32, k*tv)
	}
	gz, gy, gx := l.z.weights(blend), l.y.weights(blend), l.x.weights(blend)
	ry, rx := make([]int, th), make([]int, tw)
	classes, labels := make([]uint8, px), make([]uint16, px)
	read, emitted := 0, 0 // input slices read, output slices emitted
	p.Pool().EmptyCache() // every window allocates as planVolume's dry run did
	at, done := p.track(l.count(), "windows")
	defer done()
	n := 0
	for iz := range l.z.count {
		_, need := l.z.reads(iz)
		for ; read <= need; read++ {
			for i, in := range ins {
				if _, err := in.Next(); err != nil {
					return err
				}
				at := i*slabLen + read%l.inDepth*px
				in.Slice.Windowed16(norms[i].Lo, norms[i].Hi, slab[at:at+px])
			}
		}
		oz := l.z.origin(iz)
		for iy := range l.y.count {
			oy := l.y.origin(iy)
			for i := range ry {
				ry[i] = reflect(oy+i, Y)
			}
			for ix := range l.x.count {
				at(n)
				n++
				if err := p.stopped(); err != nil {
					return err
				}
				ox := l.x.origin(ix)
				for i := range rx {
					rx[i] = reflect(ox+i, X)
				}
				for ch := range c { // a case's modality each, or a gray volume every channel
					for dz := range td {
						src := slab[from(ch)*slabLen+reflect(oz+dz, Z)%l.inDepth*px:]
						for dy := range th {
							row, dst := src[ry[dy]*X:], window[ch*tv+(dz*th+dy)*tw:ch*tv+(dz*th+dy+1)*tw]
							for dx, sx := range rx {
								x := (float32(row[sx])/65535 - data.Mean) / data.Std // data.Window's arithmetic
								if a != nil {
									x = x*a[ch] + b[ch]
								}
								dst[dx] = x
							}
						}
					}
				}
				out, err := p.windowOutputs(logits, mean, window, td, th, tw)
				if err != nil {
					return err
				}
				accumulate(acc, out, l, oz, oy, ox, k, gz, gy, gx)
			}
		}
		end := Z // the first z-slice a later row touches
		if iz+1 < l.z.count {
			end = min(max(0, l.z.origin(iz+1)), Z)
		}
		for ; emitted < end; emitted++ {
			sums := acc[emitted%l.accDepth*k*px : (emitted%l.accDepth+1)*k*px]
			argmaxRow(sums, k, px, classes) // a slice's k planes, as a row's
			clear(sums)
			if err := emit(emitted, classes, labels); err != nil {
				return err
			}
		}
	}
	return nil
}

// accumulate adds a window's logits (k x D x H x W), weighed by the
// window's weights gz x gy x gx, into the weighted sums acc of the
// voxels it covers inside the volume.
func accumulate(acc, logits []float32, l volumeLayout, oz, oy, ox, k int, gz, gy, gx []float32) {
	X, Y, Z := l.x.n, l.y.n, l.z.n
	px := X * Y
	td, th, tw := l.z.side, l.y.side, l.x.side
	x0, x1 := max(0, -ox), min(tw, X-ox)
	for dz := range td {
		z := oz + dz
		if z < 0 || z >= Z {
			continue
		}
		slot := acc[z%l.accDepth*k*px : (z%l.accDepth+1)*k*px]
		for dy := range th {
			y := oy + dy
			if y < 0 || y >= Y {
				continue
			}
			wzy := gz[dz] * gy[dy]
			g := gx[x0:x1]
			for c := range k {
				at, from := c*px+y*X+ox, ((c*td+dz)*th+dy)*tw
				dst, src := slot[at+x0:at+x1], logits[from+x0:from+x1]
				for i, w := range g {
					dst[i] += wzy * w * src[i]
				}
			}
		}
	}
}

// volumeScorer counts a volume's predicted classes against its
// reference mask, z-slice by z-slice as they are predicted.
type volumeScorer struct {
	ref  *data.VolumeStream
	lut  map[uint16]int // a reference value's class (data.Ignore: not counted)
	conf *metrics.Confusion
	k    int
	// background is data.background, left out of MeanDiceForeground
	// (-1: none).
	background int
}

// newVolumeScorer reads ref's values as the training masks held them:
// data.labels where the checkpoint has them (values merged into a class,
// or ignored), else its mask_values, else the classes themselves; 255
// (data.Ignore) is not counted unless the labels make it a class.
func (p *Predictor) newVolumeScorer(ref *data.VolumeStream) (*volumeScorer, error) {
	k := p.Config.Model.Classes
	sc := &volumeScorer{ref: ref, lut: map[uint16]int{}, conf: metrics.NewConfusion(k), k: k, background: int(p.Config.Data.Background)}
	sc.lut[uint16(data.Ignore)] = int(data.Ignore)
	if labels := p.Config.Data.Labels; len(labels) > 0 { // training's mapping: merged and ignored values too
		for v, c := range labels {
			sc.lut[uint16(v)] = c // data.LabelIgnore is data.Ignore
		}
		return sc, nil
	}
	var values []int
	if p.Checkpoint != nil {
		values = p.Checkpoint.Manifest.MaskValues
	}
	for c := range k {
		v := c
		if values != nil {
			v = values[c]
		}
		sc.lut[uint16(v)] = c
	}
	return sc, nil
}

// add counts slice z's classes against the reference's slice z.
func (sc *volumeScorer) add(z int, classes []uint8) error {
	if _, err := sc.ref.Next(); err != nil {
		return fmt.Errorf("--references: %w", err)
	}
	s := sc.ref.Slice
	for i, c := range classes {
		raw := s.At(i)
		t := -1
		v, ok := data.MaskLabel(raw)
		if ok {
			t, ok = sc.lut[v]
		}
		if !ok {
			return fmt.Errorf("--references: %s: value %g at voxel (%d, %d, %d) is not a class's (the classes' mask values are %s)",
				sc.refPath(), raw, i%s.Dims[0], i/s.Dims[0], z, sc.valuesText())
		}
		if t == int(data.Ignore) {
			continue
		}
		sc.conf.Counts[t*sc.k+int(c)]++
	}
	return nil
}

func (sc *volumeScorer) refPath() string { return sc.ref.Path }

// valuesText lists the classes' values in the reference masks.
func (sc *volumeScorer) valuesText() string {
	vals := make([]int, sc.k)
	for v, c := range sc.lut {
		if c < sc.k {
			vals[c] = int(v)
		}
	}
	return fmt.Sprint(vals) + ", and 255 for voxels not counted"
}

// score is the volume's Dice per class and their means.
func (sc *volumeScorer) score() *VolumeScore {
	s := &VolumeScore{Reference: sc.refPath()}
	var all, fg []float64
	for _, cs := range sc.conf.PerClass() {
		s.Dice = append(s.Dice, cs.Dice)
		s.Voxels += cs.TargetPixels
		if cs.Dice != nil {
			all = append(all, *cs.Dice)
			if cs.Class != sc.background {
				fg = append(fg, *cs.Dice)
			}
		}
	}
	s.MeanDice, s.MeanDiceForeground = mean(all), mean(fg)
	return s
}

// mean is the mean of xs, nil for none.
func mean(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	return &m
}

// VolumeScore is a volume's prediction scored against its reference
// mask (Options.References), over the volume's voxels (those the
// reference marks 255 not counted).
type VolumeScore struct {
	Reference string `json:"reference"`
	// Dice is each class's 2TP/(2TP+FP+FN), null for a class in neither
	// the reference nor the prediction (undefined, left out of the means).
	Dice []*float64 `json:"dice"`
	// MeanDice is the mean over the classes present, background included;
	// MeanDiceForeground the mean over those but data.background (null
	// where none is).
	MeanDice           *float64 `json:"mean_dice"`
	MeanDiceForeground *float64 `json:"mean_dice_foreground"`
	// Voxels is the voxels counted.
	Voxels int64 `json:"voxels"`
}

// VolumeScores are the scores of the volumes predicted with references,
// averaged over the volumes.
type VolumeScores struct {
	Volumes int `json:"volumes"`
	// Dice is each class's mean over the volumes where it is defined
	// (null: none).
	Dice []*float64 `json:"dice"`
	// MeanDice and MeanDiceForeground are the means over the volumes of
	// each volume's (with background, and without).
	MeanDice           *float64 `json:"mean_dice"`
	MeanDiceForeground *float64 `json:"mean_dice_foreground"`
}

// volumeScores averages the scores of outs over the volumes that have
// one; nil when none does.
func volumeScores(outs []Output, classes int) *VolumeScores {
	per := make([][]float64, classes)
	var all, fg []float64
	n := 0
	for _, o := range outs {
		s := o.Score
		if s == nil {
			continue
		}
		n++
		for c, d := range s.Dice {
			if d != nil && c < classes {
				per[c] = append(per[c], *d)
			}
		}
		if s.MeanDice != nil {
			all = append(all, *s.MeanDice)
		}
		if s.MeanDiceForeground != nil {
			fg = append(fg, *s.MeanDiceForeground)
		}
	}
	if n == 0 {
		return nil
	}
	vs := &VolumeScores{Volumes: n, MeanDice: mean(all), MeanDiceForeground: mean(fg)}
	for _, d := range per {
		vs.Dice = append(vs.Dice, mean(d))
	}
	return vs
}

// referenceFor is the reference mask of the volume input: refs itself
// where it is a file, else the file in the folder refs named as input
// is, or as its stem (without nnU-Net's channel suffix _0000 too) with
// .nii.gz or .nii.
func referenceFor(input, refs string) (string, error) {
	st, err := os.Stat(refs)
	if err != nil {
		return "", fmt.Errorf("predict: --references: %w", err)
	}
	if !st.IsDir() {
		return refs, nil
	}
	stem := volumeStem(input)
	names := []string{filepath.Base(input), stem + ".nii.gz", stem + ".nii"}
	if n := len(stem); n > 5 && stem[n-5] == '_' && strings.Trim(stem[n-4:], "0123456789") == "" {
		names = append(names, stem[:n-5]+".nii.gz", stem[:n-5]+".nii")
	}
	for _, name := range names {
		path := filepath.Join(refs, name)
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			return path, nil
		}
	}
	return "", fmt.Errorf("predict: --references %s holds no mask for %s (looked for %s)", refs, input, strings.Join(slices.Compact(names), ", "))
}
