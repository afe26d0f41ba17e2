package predict

import (
	"fmt"
	"image"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/memory"
	"github.com/memunet/memunet/metrics"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/tiles"
)

// Tiling is how one image is predicted by tiles (package tiles): squares
// of side Tile, Batch of them per forward pass, overlapping by Overlap,
// blended by Blend.
type Tiling struct {
	Tile    int     `json:"tile"`
	Batch   int     `json:"tile_batch"`
	Overlap float64 `json:"overlap"`
	Blend   string  `json:"blend"`
	// Tiles is how many cover the image; Auto says the tile and its batch
	// were chosen as the largest whose plan fits.
	Tiles int  `json:"tiles"`
	Auto  bool `json:"auto"`
}

func (t Tiling) String() string {
	how := ""
	if t.Auto {
		how = ", the largest whose plan fits"
	}
	return fmt.Sprintf("%d tiles of %dx%d%s, %d per pass, overlap %g, %s blend", t.Tiles, t.Tile, t.Tile, how, t.Batch, t.Overlap, t.Blend)
}

// Options.Tile's words: TileAuto asks for the largest tile that fits,
// TileNone for whole images only (one that does not fit is refused).
const (
	TileAuto = "auto"
	TileNone = "none"
)

// tileSide parses Options.Tile: 0 for auto, else the side, a multiple of
// 2^model.depth.
func (p *Predictor) tileSide(tile string) (int, error) {
	if tile == TileAuto {
		return 0, nil
	}
	n, err := strconv.Atoi(tile)
	f := 1 << p.Config.Model.Depth
	if err != nil || n < f || n%f != 0 || n > data.MaxResizeSize {
		return 0, fmt.Errorf("--tile %q: want auto or a side that is a multiple of 2^model.depth = %d up to %d, e.g. %d", tile, f, data.MaxResizeSize, 16*f)
	}
	return n, nil
}

// tileNeed plans predicting an h x w picture (deep: 16 bits a channel)
// of src by tiles t: the pool's peak for a pass of t.Batch tiles
// (PlanBatch's dry run), and beside it on the host the largest phase of
// tiledHost with the collector's slack.
func (p *Predictor) tileNeed(t Tiling, h, w int, src source, deep bool, opts Options) (Need, error) {
	nd, err := p.PlanBatch(t.Batch, t.Tile, t.Tile, 0, false)
	if err != nil {
		return Need{}, err
	}
	l, err := tiles.New(h, w, t.Tile, t.Overlap)
	if err != nil {
		return Need{}, err
	}
	host := p.tiledHost(t, l, h, w, src, deep, opts, p.writtenValues(opts))
	nd.Host = host + gcSlack(host)
	return nd, nil
}

// chooseTiling picks the tiling of an h x w picture: tile side (0: the
// largest multiple of 2^model.depth whose plan fits lim's automatic share,
// lim.auto, up to the picture's longer side) and the most tiles per pass,
// up to p.Batch, that fit that share with it. A tile that cannot fit alone
// is an error naming its need.
func (p *Predictor) chooseTiling(side, h, w int, src source, deep bool, opts Options, lim Limits) (Tiling, Need, error) {
	t := Tiling{Overlap: opts.Overlap, Blend: opts.Blend, Batch: 1, Auto: side == 0}
	fits := func(t Tiling, lim Limits) (Need, bool, error) {
		nd, err := p.tileNeed(t, h, w, src, deep, opts)
		// Every pass repeats the same allocations in a pool emptied first
		// (Tiled), so its reserved peak is the dry run's: the capacity must
		// hold that, not only the allocated peak.
		return nd, err == nil && lim.exceeded(nd) == "" && (lim.Capacity == 0 || nd.PeakReserved <= lim.Capacity), err
	}
	auto := lim.auto()
	f := 1 << p.Config.Model.Depth
	if side == 0 {
		lo, hi := 0, (max(h, w)+f-1)/f // lo*f fits (0: none known), past hi no need
		for lo < hi {
			mid := (lo + hi + 1) / 2
			t.Tile = mid * f
			_, ok, err := fits(t, auto)
			if err != nil {
				return t, Need{}, err
			}
			if ok {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		side = max(lo, 1) * f
	}
	t.Tile = side
	asked := lim // a side the user gave may take all the process may use
	if t.Auto {
		asked = auto
	}
	need, ok, err := fits(t, asked)
	if err != nil {
		return t, Need{}, err
	}
	if !ok {
		what := fmt.Sprintf("a tile of %dx%d", side, side)
		if t.Auto {
			what = fmt.Sprintf("even the smallest tile, %dx%d,", side, side)
		}
		why := asked.exceeded(need)
		if why == "" {
			why = fmt.Sprintf("a pool peak of %s reserved, above its capacity %s", memory.FormatBytes(need.PeakReserved), memory.FormatBytes(lim.Capacity))
		}
		return t, Need{}, fmt.Errorf("%s needs %s; raise --capacity or free memory", what, why)
	}
	l, _ := tiles.New(h, w, t.Tile, t.Overlap)
	t.Tiles = l.Count()
	for n := 2; n <= min(p.Batch, t.Tiles); n++ {
		next := t
		next.Batch = n
		nd, ok, err := fits(next, auto)
		if err != nil || !ok {
			break
		}
		t, need = next, nd
	}
	return t, need, nil
}

// hostLogits is the logits of n normalized images, downloaded into dst
// where they are float32 and fit it (else into a new slice).
func (p *Predictor) hostLogits(dst, images []float32, n, h, w int) ([]float32, error) {
	logits, err := p.logits(images, n, h, w)
	if err != nil {
		return nil, err
	}
	defer logits.Release()
	if v := logits.View(); v.DT == backend.Float32 && v.Len == len(dst) {
		backend.DownloadFloat32Into(p.Device.Backend, dst, v)
		return dst, nil
	}
	return backend.DownloadFloat32(p.Device.Backend, logits.View()), nil
}

// Tiled predicts a picture (from data.ReadImageDeep or DeepImage, at the
// size the model takes it) by tiles t, normalized as training normalized
// its images, and hands every row of the blended outputs to row, top to
// bottom: K planes of the picture's width, the logits, or with
// probabilistic the probabilities (flip-averaged per tile with tta; an
// ensemble's always, their mean). Rows are the blender's, valid during the call; the host holds a band of
// tile rows, never the whole image's outputs. Every pass takes t.Batch
// tiles (the last filled with repeats) in a pool emptied of cached blocks
// first, so each allocates as PlanBatch's dry run did.
func (p *Predictor) Tiled(pic image.Image, t Tiling, probabilistic, tta bool, row func(y int, planes []float32) error) error {
	return p.tiled(pic, p.Config.Data.Mean, p.Config.Data.Std, t, probabilistic, tta, row)
}

// tiled is Tiled with the picture normalized by mean and std (data.mean
// and data.std's form) rather than the config's: a volume's own
// statistics where data.nifti.normalize is zscore.
func (p *Predictor) tiled(pic image.Image, mean, std []float64, t Tiling, probabilistic, tta bool, row func(y int, planes []float32) error) error {
	c, k := p.Config.Model.InChannels, p.Config.Model.Classes
	a, b, err := data.NormCoefficients(mean, std, c)
	if err != nil {
		return err
	}
	probabilistic = probabilistic || len(p.members) > 0
	h, w := pic.Bounds().Dy(), pic.Bounds().Dx()
	l, err := tiles.New(h, w, t.Tile, t.Overlap)
	if err != nil {
		return err
	}
	blend := tiles.NewBlender(l, k, tiles.Weights(t.Tile, t.Blend), t.Batch)
	tt := t.Tile * t.Tile
	input := make([]float32, t.Batch*c*tt)
	var logits []float32 // every pass's, downloaded into one buffer
	if !probabilistic {
		logits = make([]float32, t.Batch*k*tt)
	}
	p.Pool().EmptyCache()
	at, done := p.track(l.Count(), "tiles")
	defer done()
	for first := 0; first < l.Count(); first += t.Batch {
		at(first)
		if err := p.stopped(); err != nil {
			return err
		}
		n := min(t.Batch, l.Count()-first)
		for j := range t.Batch {
			y0, x0 := l.Origin(first + min(j, n-1))
			data.Window(pic, c, y0, x0, t.Tile, t.Tile, a, b, true, input[j*c*tt:(j+1)*c*tt])
		}
		var out []float32
		if probabilistic {
			out, err = p.Probabilities(input, t.Batch, t.Tile, t.Tile, tta)
		} else {
			out, err = p.hostLogits(logits, input, t.Batch, t.Tile, t.Tile)
		}
		if err != nil {
			return err
		}
		for j := range n {
			if err := blend.Add(first+j, out[j*k*tt:(j+1)*k*tt]); err != nil {
				return err
			}
		}
		if err := blend.Emit(row); err != nil {
			return err
		}
	}
	return nil
}

// tiledSize is the size an h x w file is given to the model at when it is
// predicted by tiles: as sizing says, but its sides not rounded to a
// multiple of 2^model.depth (the tiles' padding takes any size).
func (s sizing) tiledSize(p *Predictor, h, w int) (int, int) {
	switch {
	case s.mode == "fixed" || s.mode == ResizeTrain:
		return s.h, s.w
	case s.mode == ResizeAuto && len(p.Config.Data.Resize) == 2:
		return p.Config.Data.Resize[0], p.Config.Data.Resize[1]
	case s.mode == ResizeAuto && p.Config.Data.Scale > 0:
		return max(1, int(float64(h)*p.Config.Data.Scale+0.5)), max(1, int(float64(w)*p.Config.Data.Scale+0.5))
	}
	return h, w
}

// predictFileTiled predicts one file by tiles: side (0: the largest that
// fits lim) at the size sizing gives it, unrounded; its mask is scaled
// back to the file's size where that differs, and written as the whole
// path writes it.
func (p *Predictor) predictFileTiled(f sizedFile, side int, s sizing, journal *outdir.Journal, opts Options, lim Limits, note io.Writer, rep *Report) error {
	c, k := p.Config.Model.InChannels, p.Config.Model.Classes
	th, tw := s.tiledSize(p, f.h, f.w)
	src := f.source()
	deep := src.picture > 4*src.pixels()
	t, need, err := p.chooseTiling(side, th, tw, src, deep, opts, lim)
	if err != nil {
		return fmt.Errorf("predict: %s (%dx%d, at %dx%d) by tiles: %w", f.path, f.h, f.w, th, tw, err)
	}
	rss := p.held.hold(need)
	fmt.Fprintf(note, "predict: %s (%dx%d) by %s: planned pool peak %s allocated, host %s%s\n",
		f.path, th, tw, t, memory.FormatBytes(need.PeakAllocated), memory.FormatBytes(need.Host), rssText(rss))
	rep.plan(need, rss)
	pic, err := data.ReadImageDeep(f.path, c)
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	model := data.ScalePicture(pic, th, tw)
	if !opts.Overlay {
		pic = nil // only an overlay draws on it: the collector may have it
	}
	mask := make([]uint8, th*tw)
	var probs []float32
	if opts.Probs != "" {
		probs = make([]float32, k*th*tw)
	}
	err = p.Tiled(model, t, opts.probabilistic(), opts.TTA, func(y int, planes []float32) error {
		argmaxRow(planes, k, tw, mask[y*tw:(y+1)*tw])
		for cl := 0; probs != nil && cl < k; cl++ {
			copy(probs[(cl*th+y)*tw:(cl*th+y+1)*tw], planes[cl*tw:(cl+1)*tw])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("predict: %s: %w", f.path, err)
	}
	model = nil
	out, dir := outputOf(f.path, f.stem, opts, k), journal.Dir()
	out.Tiling = &t
	if err := journal.Claim(out.files()...); err != nil {
		return err
	}
	full := scaleMask(mask, tw, th, f.w, f.h)
	if out.KeptLargest, err = opts.keepLargest(full, [3]int{f.w, f.h, 1}, p.Config.Data.Background); err != nil {
		return err
	}
	if err := writeMask(filepath.Join(dir, out.Mask), full, f.w, f.h, rep.MaskValues); err != nil {
		return err
	}
	if out.Probs != nil {
		if err := writeProbs(dir, out.Probs, probs, k, tw, th, f.w, f.h); err != nil {
			return err
		}
	}
	if out.Overlay != "" {
		if err := outdir.WritePNG(filepath.Join(dir, out.Overlay), data.Overlay(data.EightBit(pic), full, f.w, f.h)); err != nil {
			return err
		}
	}
	rep.Outputs = append(rep.Outputs, out)
	return nil
}

// argmaxRow is each pixel's class of one row of k planes of w values (the
// first on ties, as the device's Argmax).
func argmaxRow(planes []float32, k, w int, out []uint8) {
	for x := range w {
		best := 0
		for c := 1; c < k; c++ {
			if planes[c*w+x] > planes[best*w+x] {
				best = c
			}
		}
		out[x] = uint8(best)
	}
}

// tilingNote says that an image that does not fit whole is predicted by
// tiles.
func tilingNote(note io.Writer, f sizedFile, e *SizeError) {
	fmt.Fprintf(note, "predict: %s at %dx%d does not fit whole (%s); predicting it by tiles (--tile auto)\n", f.path, e.TH, e.TW, e.Why)
}

// splitTile is the tiles' side of a data.patch checkpoint's split: --tile
// (auto: 0, the largest that fits), else predict.tile, else the patch's
// shorter side, as its training validated.
func (p *Predictor) splitTile(opts Options) (int, error) {
	if opts.Tile != "" && opts.Tile != TileNone {
		return p.tileSide(opts.Tile)
	}
	if t := p.Config.Predict.Tile; t > 0 {
		return t, nil
	}
	pt := p.Config.Data.Patch
	return min(pt[0], pt[1]), nil
}

// scoreSplitTiled scores a data.patch checkpoint's split as its training
// validated it: each image whole, at full resolution, by tiles; the loss
// is the cross-entropy of the blended logits (or -log of the blended
// probabilities where opts asks for them) per counted pixel. each gets
// every image's classes (and probabilities) at its size.
func (p *Predictor) scoreSplitTiled(in *splitInput, opts Options, lim Limits, rep *Report, each func(i int, pred, target []uint8, probs []float32, h, w int) error) (metrics.Validation, error) {
	side, err := p.splitTile(opts)
	if err != nil {
		return metrics.Validation{}, err
	}
	k := p.Config.Model.Classes
	conf := metrics.NewConfusion(k)
	var loss float64
	var counted int64
	prob := opts.probabilistic()
	at, done := p.track(len(in.idx), "samples")
	defer done()
	for j, i := range in.idx {
		at(j)
		var pic image.Image
		var mask *image.Gray
		if d, ok := in.whole.(data.DeepImager); ok {
			pic, mask, err = d.DeepImage(i)
		} else {
			pic, mask, err = in.whole.Image(i)
		}
		if err != nil {
			return metrics.Validation{}, err
		}
		h, w := pic.Bounds().Dy(), pic.Bounds().Dx()
		t, need, err := p.chooseTiling(side, h, w, source{h: h, w: w}, true, opts, lim)
		if err != nil {
			return metrics.Validation{}, fmt.Errorf("sample %d (%dx%d) by tiles: %w", i, h, w, err)
		}
		if rep != nil {
			rep.plan(need, p.held.hold(need))
		}
		pred := make([]uint8, h*w)
		var probs []float32
		if opts.Probs != "" {
			probs = make([]float32, k*h*w)
		}
		err = p.Tiled(pic, t, prob, opts.TTA, func(y int, planes []float32) error {
			row := pred[y*w : (y+1)*w]
			argmaxRow(planes, k, w, row)
			for x, target := range mask.Pix[y*mask.Stride : y*mask.Stride+w] {
				if target == backend.IgnoreIndex || int(target) >= k {
					continue
				}
				conf.Counts[int(target)*k+int(row[x])]++
				counted++
				if prob {
					loss -= math.Log(max(float64(planes[int(target)*w+x]), 1e-45))
					continue
				}
				top := float64(planes[int(row[x])*w+x])
				var sum float64
				for c := range k {
					sum += math.Exp(float64(planes[c*w+x]) - top)
				}
				loss += top + math.Log(sum) - float64(planes[int(target)*w+x])
			}
			for c := 0; probs != nil && c < k; c++ {
				copy(probs[(c*h+y)*w:(c*h+y+1)*w], planes[c*w:(c+1)*w])
			}
			return nil
		})
		if err != nil {
			return metrics.Validation{}, err
		}
		target := make([]uint8, h*w)
		for y := range h {
			copy(target[y*w:(y+1)*w], mask.Pix[y*mask.Stride:])
		}
		if err := each(i, pred, target, probs, h, w); err != nil {
			return metrics.Validation{}, err
		}
	}
	if len(in.idx) == 0 {
		return metrics.Validation{}, fmt.Errorf("the split has no samples")
	}
	return p.validation(conf, loss/float64(max(counted, 1))), nil
}
