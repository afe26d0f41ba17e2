package predict

import (
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/outdir"
)

// ImageExts are the inputs predict reads from a directory.
var ImageExts = []string{".png", ".jpg", ".jpeg", ".gif", ".tif", ".tiff"}

// sizedFile is an input file with its size (from its header), the size
// the model takes it at and the stem of its outputs.
type sizedFile struct {
	path         string
	h, w, th, tw int
	stem         string
	// decode and picture are what reading the file holds (data.ImageInfo).
	decode, picture int64
	// channels are a case's modality files in channel order, path first
	// (caseModalities); nil for a file read alone.
	channels []string
}

// volumes are the NIfTI files f reads: its case's modalities, or itself.
func (f sizedFile) volumes() []string {
	if f.channels != nil {
		return f.channels
	}
	return []string{f.path}
}

// source is the picture f holds, for a plan.
func (f sizedFile) source() source {
	return source{h: f.h, w: f.w, decode: f.decode, picture: f.picture}
}

// maxImageFileBytes bounds an input image file: a 16-bit RGBA picture of
// data.MaxImagePixels stored uncompressed.
const maxImageFileBytes = 8 * data.MaxImagePixels

// sizeFiles reads the header of each input file (refusing what is not a
// regular file, and a picture of more than data.MaxImagePixels, before
// anything of its size exists) and names its outputs. A file whose name
// cannot name its outputs (namer.fileName) is skipped with a warning on
// warn and listed in skipped, so that one odd name does not stop the rest;
// when every file is skipped nothing would be predicted, which is an
// error.
func (p *Predictor) sizeFiles(input string, s sizing, names *namer, warn io.Writer) (sized []sizedFile, skipped []Skipped, err error) {
	files, err := inputFiles(input)
	if err != nil {
		return nil, nil, err
	}
	var cases map[string]modalityCase
	if c := p.caseModalities(); c > 0 { // a case's modality files predict once, as the case
		if files, cases, err = modalityCases(files, c); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range files {
		if c := p.Config.Model.InChannels; c != 1 && c != 3 && !isVolume(f) {
			return nil, nil, fmt.Errorf("predict: %s: the model takes %d channels; image files give 1 (gray) or 3 (RGB)", f, c)
		}
		stem, suffix := fileStem(f)
		if isVolume(f) {
			stem, suffix = volumeStem(f), "nii"
		}
		mc, isCase := cases[f]
		if isCase {
			stem = mc.name // nnU-Net's CASE.nii.gz
			if !p.Config.Model.Volumes() && len(mc.files) > maxSliceModalities {
				return nil, nil, sliceModalitiesError(f, len(mc.files))
			}
		}
		stem, why := names.fileName(f, stem, suffix)
		if why != "" {
			skipped = append(skipped, Skipped{Input: f, Why: why})
			fmt.Fprintf(warn, "memunet: predict: warning: skipped %q: %s; rename it to predict it\n", f, why)
			continue
		}
		if p.Config.Model.Volumes() && !isVolume(f) {
			return nil, nil, fmt.Errorf("predict: %s: a 3D UNet (model.dims 3) predicts NIfTI volumes (.nii, .nii.gz), not image files", f)
		}
		if isVolume(f) { // read when it is predicted: whole by a 2D model, streamed by a 3D one
			sized = append(sized, sizedFile{path: f, stem: stem, channels: mc.files})
			continue
		}
		info, err := data.ReadImageInfo(f)
		if err != nil {
			return nil, nil, fmt.Errorf("predict: %w", err)
		}
		h, w := info.H, info.W
		if int64(h)*int64(w) > data.MaxImagePixels {
			return nil, nil, fmt.Errorf("predict: %s: an image of %dx%d (height x width) pixels is larger than the %d pixels memunet reads; scale it down beforehand",
				f, h, w, data.MaxImagePixels)
		}
		th, tw := s.modelSize(p.Config, h, w)
		sized = append(sized, sizedFile{path: f, h: h, w: w, th: th, tw: tw, stem: stem, decode: info.Decode, picture: info.Picture})
	}
	if len(sized) == 0 {
		return nil, nil, fmt.Errorf("predict: --input %q: nothing to predict: its %d file(s) were skipped (e.g. %q: %s); rename them and run again",
			input, len(skipped), skipped[0].Input, skipped[0].Why)
	}
	return sized, skipped, nil
}

// predictFiles predicts image files. Each is prepared as training prepared
// its images: decoded as the file datasets decode them, scaled to
// data.resize (or by data.scale; bilinear, as data.resize scales), with
// sides rounded to a multiple of 2^model.depth, normalized by data.mean and
// data.std; its mask is scaled back to the image's own size (nearest).
// Consecutive images of one size go through the model together, up to
// p.Batch at a time and as many as fit. Before a file is decoded its
// batch's memory is planned from the file's header (PlanBatch): an image
// that cannot fit alone is refused with a *SizeError naming what it needs
// and what would fit; one that needs more than 1 GiB is announced on note.
// Outputs go into the journal's folder, each claimed there before it is
// written, and are listed in rep.
func (p *Predictor) predictFiles(sized []sizedFile, s sizing, journal *outdir.Journal, opts Options, lim Limits, note io.Writer, rep *Report) error {
	side := 0
	if opts.Tile != "" && opts.Tile != TileNone {
		var err error
		if side, err = p.tileSide(opts.Tile); err != nil {
			return fmt.Errorf("predict: %w", err)
		}
	}
	at, done := p.track(len(sized), "files")
	defer done()
	for lo := 0; lo < len(sized); {
		if err := p.stopped(); err != nil {
			return err
		}
		at(lo)
		if isVolume(sized[lo].path) {
			predict := func() error { return p.predictVolume(sized[lo], side, journal, opts, lim, note, rep) }
			if p.Config.Model.Volumes() {
				predict = func() error { return p.predictVolume3D(sized[lo], journal, opts, lim, note, rep) }
			}
			if err := predict(); err != nil {
				return err
			}
			lo++
			continue
		}
		if opts.Tile != "" && opts.Tile != TileNone { // every file by tiles
			if err := p.predictFileTiled(sized[lo], side, s, journal, opts, lim, note, rep); err != nil {
				return err
			}
			lo++
			continue
		}
		hi, need, err := p.fileBatch(sized, lo, s, opts, lim)
		var tooLarge *SizeError
		if errors.As(err, &tooLarge) && opts.Tile != TileNone { // whole it does not fit: by the largest tiles that do
			tilingNote(note, sized[lo], tooLarge)
			if err := p.predictFileTiled(sized[lo], 0, s, journal, opts, lim, note, rep); err != nil {
				return err
			}
			lo++
			continue
		}
		if err != nil {
			return err
		}
		if need.Total() > largeNeed {
			first := sized[lo]
			fmt.Fprintf(note, "predict: %d image(s) from %s at %dx%d need %s\n", need.N, first.path, first.th, first.tw, need)
		}
		rep.plan(need, p.held.hold(need))
		if err := p.predictFileBatch(sized[lo:hi], journal, opts, rep); err != nil {
			return err
		}
		lo = hi
	}
	rep.Images = len(sized)
	rep.VolumeScores = volumeScores(rep.Outputs, p.Config.Model.Classes)
	return nil
}

// fileBatch is the batch that starts at sized[lo]: consecutive files of
// one model size, at most p.Batch, while their plan fits lim (its share
// for automatic choices, lim.auto, but for a first file opts.Tile says to
// predict whole). It ends before hi and returns the batch's need, its
// host buffers by batchHost; a first file that cannot fit alone is a
// *SizeError.
func (p *Predictor) fileBatch(sized []sizedFile, lo int, s sizing, opts Options, lim Limits) (hi int, need Need, err error) {
	first := sized[lo]
	var srcs []source
	for hi = lo; hi < len(sized) && hi-lo < p.Batch && sized[hi].th == first.th && sized[hi].tw == first.tw && !isVolume(sized[hi].path); hi++ {
		srcs = append(srcs, sized[hi].source())
		nd, err := p.PlanBatch(len(srcs), first.th, first.tw, 0, false)
		if err != nil {
			return 0, Need{}, fmt.Errorf("predict: %s: %w", sized[hi].path, err)
		}
		host := p.batchHost(srcs, first.th, first.tw, opts, p.writtenValues(opts))
		nd.Host = host + gcSlack(host)
		within := lim.auto()
		if hi == lo && opts.Tile == TileNone {
			within = lim // asked to predict it whole: all the process may use
		}
		if why := within.exceeded(nd); why != "" {
			if hi == lo {
				return 0, Need{}, &SizeError{File: first.path, H: first.h, W: first.w, TH: first.th, TW: first.tw, Need: nd, Why: why,
					Advice: "Predict it at full resolution by tiles (--tile auto, or leave --tile none out); or: " + p.sizeAdvice(first.h, first.w, s, opts.Overlay, within)}
			}
			break
		}
		need = nd
	}
	return hi, need, nil
}

// predictFileBatch decodes, prepares and predicts files (one model size),
// and writes their outputs.
func (p *Predictor) predictFileBatch(files []sizedFile, journal *outdir.Journal, opts Options, rep *Report) error {
	c, k := p.Config.Model.InChannels, p.Config.Model.Classes
	src := &fileSource{channels: c, classes: k}
	for _, f := range files {
		img, err := data.ReadImageDeep(f.path, c)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		src.images = append(src.images, img)
	}
	h, w := files[0].th, files[0].tw
	ds, err := data.Resize(src, h, w)
	if err == nil && (len(p.Config.Data.Mean) > 0 || len(p.Config.Data.Std) > 0) {
		ds, err = data.Normalize(ds, p.Config.Data.Mean, p.Config.Data.Std)
	}
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	n := len(files)
	images := make([]float32, n*c*h*w)
	if err := data.FillBatch(ds, seq(n), images, make([]uint8, n*h*w)); err != nil {
		return err
	}
	pred, probs, err := p.predictBatch(images, n, h, w, opts.TTA, opts.probabilistic())
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	for j, f := range files {
		img := src.images[j]
		b := img.Bounds()
		mask := scaleMask(pred[j*h*w:(j+1)*h*w], w, h, b.Dx(), b.Dy())
		out, dir := outputOf(f.path, f.stem, opts, k), journal.Dir()
		if out.KeptLargest, err = opts.keepLargest(mask, [3]int{b.Dx(), b.Dy(), 1}, p.Config.Data.Background); err != nil {
			return err
		}
		if err := journal.Claim(out.files()...); err != nil {
			return err
		}
		if err := writeMask(filepath.Join(dir, out.Mask), mask, b.Dx(), b.Dy(), rep.MaskValues); err != nil {
			return err
		}
		if out.Probs != nil {
			if err := writeProbs(dir, out.Probs, probs[j*k*h*w:(j+1)*k*h*w], k, w, h, b.Dx(), b.Dy()); err != nil {
				return err
			}
		}
		if out.Overlay != "" {
			if err := outdir.WritePNG(filepath.Join(dir, out.Overlay), data.Overlay(data.EightBit(img), mask, b.Dx(), b.Dy())); err != nil {
				return err
			}
		}
		rep.Outputs = append(rep.Outputs, out)
	}
	return nil
}

// predictBatch is the classes of n normalized images, and with
// probabilistic their probabilities (flip-averaged with tta) too.
func (p *Predictor) predictBatch(images []float32, n, h, w int, tta, probabilistic bool) ([]uint8, []float32, error) {
	if !probabilistic {
		pred, err := p.Predict(images, n, h, w)
		return pred, nil, err
	}
	probs, err := p.Probabilities(images, n, h, w, tta)
	if err != nil {
		return nil, nil, err
	}
	return Argmax(probs, n, p.Config.Model.Classes, h, w), probs, nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// inputFiles is input itself, or the image files directly in the directory
// input, sorted.
func inputFiles(input string) ([]string, error) {
	st, err := os.Stat(input)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("predict: --input %s does not exist", input)
		}
		return nil, fmt.Errorf("predict: --input: %w", err)
	}
	if !st.IsDir() {
		if err := checkInputFile(input); err != nil {
			return nil, err
		}
		return []string{input}, nil
	}
	des, err := os.ReadDir(input)
	if err != nil {
		return nil, fmt.Errorf("predict: --input: %w", err)
	}
	var files []string
	for _, de := range des {
		if !de.IsDir() && (slices.Contains(ImageExts, strings.ToLower(filepath.Ext(de.Name()))) || isVolume(de.Name())) {
			path := filepath.Join(input, de.Name())
			if err := checkInputFile(path); err != nil {
				return nil, err
			}
			files = append(files, path)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("predict: --input %s holds no %s, .nii or .nii.gz files", input, strings.Join(ImageExts, ", "))
	}
	return files, nil
}

// checkInputFile refuses, by name, an input that is not a regular file (a
// FIFO would hang the read, a link to /dev/zero never end it) or is larger
// than an image file can be, before a byte of it is read.
func checkInputFile(path string) error {
	f, _, err := infile.Open(path, maxImageFileBytes)
	if err != nil {
		return fmt.Errorf("predict: --input: %w", err)
	}
	return f.Close()
}

// fileSource is a batch of decoded images (data.ReadImageDeep: 16 bits
// kept) as a data.ImageSource and DeepImager (with empty masks), so that
// data.Resize prepares them exactly as training does.
type fileSource struct {
	images            []image.Image
	channels, classes int
}

func (s *fileSource) Len() int      { return len(s.images) }
func (s *fileSource) Channels() int { return s.channels }
func (s *fileSource) Classes() int  { return s.classes }
func (s *fileSource) Size() (int, int) {
	b := s.images[0].Bounds()
	return b.Dy(), b.Dx()
}
func (s *fileSource) Sample(int, []float32, []uint8) error {
	return errors.New("predict: file images are read through data.Resize")
}
func (s *fileSource) Image(i int) (*image.RGBA, *image.Gray, error) {
	img, mask, err := s.DeepImage(i)
	if err != nil {
		return nil, nil, err
	}
	return data.EightBit(img), mask, nil
}

func (s *fileSource) DeepImage(i int) (image.Image, *image.Gray, error) {
	if i < 0 || i >= len(s.images) {
		return nil, nil, fmt.Errorf("image %d out of range", i)
	}
	return s.images[i], image.NewGray(s.images[i].Bounds()), nil
}
