package predict

import (
	"fmt"
	"image"
	"io"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/outdir"
)

// predictVolume predicts a NIfTI volume slice by slice, across the
// checkpoint's data.nifti.axis and windowed by its data.nifti.window (or
// the volume's min and max) as data.source nifti prepares slices, and
// writes the classes (or the training masks' values) as a mask volume of
// the same name and extension with the volume's header geometry
// (data.WriteMaskVolume). A slice is predicted whole where it fits and
// its sides are multiples of 2^model.depth, else by tiles, as opts.Tile
// says for image files.
func (p *Predictor) predictVolume(f sizedFile, side int, journal *outdir.Journal, opts Options, lim Limits, note io.Writer, rep *Report) error {
	if opts.Overlay || opts.Probs != "" {
		return fmt.Errorf("predict: %s: --overlay and --probs apply to image files; a NIfTI volume's output is its mask volume", f.path)
	}
	if c := p.Config.Model.InChannels; c != 1 {
		return fmt.Errorf("predict: %s: the model takes %d channels and a NIfTI volume gives 1", f.path, c)
	}
	v, err := data.ReadVolume(f.path, 0)
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	nc := p.Config.Data.NIfTI
	norm := v.Intensity(nc)
	lo, hi := norm.Lo, norm.Hi
	if norm.ZScore { // the volume's own statistics, as data.mean and data.std for its slices
		defer func(mean, std []float64) { p.Config.Data.Mean, p.Config.Data.Std = mean, std }(p.Config.Data.Mean, p.Config.Data.Std)
		m, s := norm.MeanStd()
		p.Config.Data.Mean, p.Config.Data.Std = []float64{m}, []float64{s}
	}
	h, w := v.SliceSize(nc.Axis)
	labels := make([]uint16, v.Len())
	mask := make([]uint8, h*w)
	// Held while each slice is predicted: the stored voxels, the labels,
	// the slice's classes, and its picture (16-bit gray, then RGBA64).
	held := int64(len(v.Voxels)) + 2*int64(v.Len()) + int64(h)*int64(w)*(1+2+8)
	var tiling *Tiling
	at, done := p.track(v.Slices(nc.Axis), "slices")
	defer done()
	for k := range v.Slices(nc.Axis) {
		at(k)
		if err := p.stopped(); err != nil {
			return err
		}
		pic := v.SlicePicture(nc.Axis, k, lo, hi)
		t, err := p.predictPicture(pic, side, opts, lim, mask, held, rep)
		if err != nil {
			return fmt.Errorf("predict: %s, slice %d across axis %d: %w", f.path, k, nc.Axis, err)
		}
		if t != nil && tiling == nil {
			tiling = t
			fmt.Fprintf(note, "predict: %s: its %dx%d slices by %s\n", f.path, h, w, t)
		}
		for y := range h {
			for x := range w {
				c := mask[y*w+x]
				l := uint16(c)
				if rep.MaskValues != nil {
					l = uint16(rep.MaskValues[c])
				}
				labels[v.VoxelIndex(nc.Axis, k, y, x)] = l
			}
		}
	}
	name := f.stem + ".nii"
	if v.Gzip {
		name += ".gz"
	}
	if err := journal.Claim(name); err != nil {
		return err
	}
	path := filepath.Join(journal.Dir(), name)
	if err := outdir.WriteFile(path, func(wr io.Writer) error { return data.WriteMaskVolume(wr, v, labels, v.Gzip) }); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	rep.Outputs = append(rep.Outputs, Output{Input: f.path, Mask: name, Tiling: tiling})
	return nil
}

// predictPicture writes the classes of one picture (at the size the model
// takes it) into mask: whole where its sides suit the model and it fits
// lim (and opts.Tile does not ask for tiles), else by tiles (side 0: the
// largest that fits), whose tiling it returns. held
// is what the caller holds on the host beside (the picture included); the
// plan is noted in rep.
func (p *Predictor) predictPicture(pic image.Image, side int, opts Options, lim Limits, mask []uint8, held int64, rep *Report) (*Tiling, error) {
	h, w := pic.Bounds().Dy(), pic.Bounds().Dx()
	c := p.Config.Model.InChannels
	if opts.Tile == "" || opts.Tile == TileNone {
		whole := lim // asked for: all the process may use
		if opts.Tile == "" {
			whole = lim.auto() // whole or by tiles is memunet's choice
		}
		nd, err := p.PlanBatch(1, h, w, 0, false)
		host := held + p.wholeHost(1, h, w, opts)
		nd.Host = host + gcSlack(host)
		if err == nil && whole.exceeded(nd) == "" {
			rep.plan(nd, p.held.hold(nd))
			a, b, err := data.NormCoefficients(p.Config.Data.Mean, p.Config.Data.Std, c)
			if err != nil {
				return nil, err
			}
			images := make([]float32, c*h*w)
			data.Window(pic, c, 0, 0, h, w, a, b, false, images)
			pred, _, err := p.predictBatch(images, 1, h, w, opts.TTA, opts.TTA)
			copy(mask, pred)
			return nil, err
		}
		if opts.Tile == TileNone {
			if err == nil {
				err = fmt.Errorf("predicting it whole needs %s; leave --tile none out to predict it by tiles", whole.exceeded(nd))
			}
			return nil, err
		}
	}
	t, need, err := p.chooseTiling(side, h, w, source{h: h, w: w, picture: held}, true, opts, lim)
	if err != nil {
		return nil, err
	}
	rep.plan(need, p.held.hold(need))
	k := p.Config.Model.Classes
	err = p.Tiled(pic, t, opts.TTA, opts.TTA, func(y int, planes []float32) error {
		argmaxRow(planes, k, w, mask[y*w:(y+1)*w])
		return nil
	})
	return &t, err
}

// isVolume reports whether an input is a NIfTI volume (.nii, .nii.gz).
func isVolume(path string) bool { return data.IsNIfTIName(path) }

// volumeStem is a NIfTI file's name without .nii or .nii.gz.
func volumeStem(path string) string {
	base := filepath.Base(path)
	for _, ext := range []string{".nii.gz", ".nii"} {
		if strings.HasSuffix(strings.ToLower(base), ext) {
			return base[:len(base)-len(ext)]
		}
	}
	return base
}
