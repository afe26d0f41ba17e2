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
// says for image files. A case of several modalities (f.channels, up to
// maxSliceModalities) is read a volume a modality, each windowed (or
// z-scored) by its own intensities as training's, slice k of modality ch
// the picture's channel ch; its mask is the case's, with channel 0's
// header geometry. --keep-largest takes the volume whole, 6-connected.
func (p *Predictor) predictVolume(f sizedFile, side int, journal *outdir.Journal, opts Options, lim Limits, note io.Writer, rep *Report) error {
	if opts.Overlay || opts.Probs != "" {
		return fmt.Errorf("predict: %s: --overlay and --probs apply to image files; a NIfTI volume's output is its mask volume", f.path)
	}
	paths := f.volumes()
	if c := p.Config.Model.InChannels; len(paths) != c {
		if len(paths) == 1 {
			return fmt.Errorf("predict: %s: the model takes %d channels and a NIfTI volume gives 1; a 2D model predicts volumes of 1 channel, or cases of as many modalities (CASE_0000.nii.gz .. CASE_%04d.nii.gz) when it was trained on them (data.source nifti)", f.path, c, c-1)
		}
		return fmt.Errorf("predict: %s: a case of %d modalities for a model of %d channels", f.path, len(paths), c)
	}
	if len(paths) > maxSliceModalities {
		return sliceModalitiesError(f.path, len(paths))
	}
	vols := make([]*data.Volume, len(paths))
	norms := make([]data.Intensity, len(paths))
	nc := p.Config.Data.NIfTI
	var stored int64
	for i, path := range paths {
		v, err := data.ReadVolume(path, 0)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		if i > 0 && v.Dims != vols[0].Dims {
			d, d0 := v.Dims, vols[0].Dims
			return fmt.Errorf("predict: %s is %dx%dx%d voxels but %s is %dx%dx%d; a case's modalities must have one size", path, d[0], d[1], d[2], f.path, d0[0], d0[1], d0[2])
		}
		norm, err := v.Intensity(nc)
		if err != nil {
			return fmt.Errorf("predict: %s: %w", path, err)
		}
		vols[i], norms[i] = v, norm
		stored += int64(len(v.Voxels))
	}
	v := vols[0]
	mean, std := p.Config.Data.Mean, p.Config.Data.Std
	if norms[0].ZScore { // each volume's own statistics, as data.mean and data.std for its channel
		mean, std = nil, nil
		for _, norm := range norms {
			m, s := norm.MeanStd()
			mean, std = append(mean, m), append(std, s)
		}
	}
	h, w := v.SliceSize(nc.Axis)
	labels := make([]uint16, v.Len())
	label := func(c uint8) uint16 {
		if rep.MaskValues != nil {
			return uint16(rep.MaskValues[c])
		}
		return uint16(c)
	}
	mask := make([]uint8, h*w)
	// Held while each slice is predicted: the stored voxels, the labels,
	// the slice's classes, and its picture (16-bit gray, then RGBA64; a
	// case's modality's, and the case's); for --keep-largest the
	// volume's classes and its marks and queue.
	pics := int64(1)
	if len(vols) > 1 {
		pics = 2
	}
	held := stored + 2*int64(v.Len()) + int64(h)*int64(w)*(1+pics*(2+8))
	var whole []uint8 // the volume's classes, taken whole by --keep-largest
	if opts.keep != nil {
		whole = make([]uint8, v.Len())
		held += int64(v.Len()) + largestBytes(int64(v.Len()))
	}
	var tiling *Tiling
	at, done := p.track(v.Slices(nc.Axis), "slices")
	defer done()
	for k := range v.Slices(nc.Axis) {
		at(k)
		if err := p.stopped(); err != nil {
			return err
		}
		pic, err := slicePicture(vols, norms, nc.Axis, k)
		if err != nil {
			return fmt.Errorf("predict: %s: %w", f.path, err)
		}
		t, err := p.predictPicture(pic, mean, std, side, opts, lim, mask, held, rep)
		if err != nil {
			return fmt.Errorf("predict: %s, slice %d across axis %d: %w", f.path, k, nc.Axis, err)
		}
		if t != nil && tiling == nil {
			tiling = t
			fmt.Fprintf(note, "predict: %s: its %dx%d slices by %s\n", f.path, h, w, t)
		}
		for y := range h {
			for x := range w {
				if i := v.VoxelIndex(nc.Axis, k, y, x); whole != nil {
					whole[i] = mask[y*w+x]
				} else {
					labels[i] = label(mask[y*w+x])
				}
			}
		}
	}
	kept, err := opts.keepLargest(whole, v.Dims, p.Config.Data.Background)
	if err != nil {
		return fmt.Errorf("predict: %s: %w", f.path, err)
	}
	for i, c := range whole {
		labels[i] = label(c)
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
	rep.Outputs = append(rep.Outputs, Output{Input: f.path, Channels: f.channels, Mask: name, Tiling: tiling, KeptLargest: kept})
	return nil
}

// maxSliceModalities is the most modalities a case predicted slice by
// slice (a 2D model) may have: a slice's picture holds one a channel of
// its 16-bit RGBA, which data.Window reads as the model's channels.
const maxSliceModalities = 4

// sliceModalitiesError refuses a case of n modalities, more than a 2D
// model's slice pictures hold.
func sliceModalitiesError(path string, n int) error {
	return fmt.Errorf("predict: %s: a 2D model predicts cases of up to %d modalities, and this one takes %d (model.in_channels); predict with a 3D UNet (model.dims 3) trained on them, which streams any count, or train on %d modalities or fewer",
		path, maxSliceModalities, n, maxSliceModalities)
}

// slicePicture is slice k across axis of vols as the model's picture:
// one volume's windowed to 16 bits in every channel
// (Volume.SlicePicture); a case's modalities one a channel (R, G, B,
// A), each by its own window, the channels past them 0 (alpha 65535).
func slicePicture(vols []*data.Volume, norms []data.Intensity, axis, k int) (image.Image, error) {
	if len(vols) == 1 {
		return vols[0].SlicePicture(axis, k, norms[0].Lo, norms[0].Hi), nil
	}
	h, w := vols[0].SliceSize(axis)
	pic := image.NewRGBA64(image.Rect(0, 0, w, h))
	if len(vols) < 4 {
		for i := 6; i < len(pic.Pix); i += 8 {
			pic.Pix[i], pic.Pix[i+1] = 0xff, 0xff
		}
	}
	for ch, v := range vols {
		m, ok := v.SlicePicture(axis, k, norms[ch].Lo, norms[ch].Hi).(*image.RGBA64)
		if !ok || m.Stride != 8*w || m.Rect != pic.Rect {
			return nil, fmt.Errorf("slice %d of modality %d is not a 16-bit picture of %dx%d", k, ch, h, w)
		}
		for i := 0; i < len(pic.Pix); i += 8 {
			pic.Pix[i+2*ch], pic.Pix[i+2*ch+1] = m.Pix[i], m.Pix[i+1]
		}
	}
	return pic, nil
}

// predictPicture writes the classes of one picture (at the size the model
// takes it, normalized by mean and std in data.mean's form) into mask:
// whole where its sides suit the model and it fits lim (and opts.Tile
// does not ask for tiles), else by tiles (side 0: the largest that fits),
// whose tiling it returns. held is what the caller holds on the host
// beside (the picture included); the plan is noted in rep.
func (p *Predictor) predictPicture(pic image.Image, mean, std []float64, side int, opts Options, lim Limits, mask []uint8, held int64, rep *Report) (*Tiling, error) {
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
			a, b, err := data.NormCoefficients(mean, std, c)
			if err != nil {
				return nil, err
			}
			images := make([]float32, c*h*w)
			data.Window(pic, c, 0, 0, h, w, a, b, false, images)
			pred, _, err := p.predictBatch(images, 1, h, w, opts.TTA, opts.probabilistic())
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
	err = p.tiled(pic, mean, std, t, opts.probabilistic(), opts.TTA, func(y int, planes []float32) error {
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
