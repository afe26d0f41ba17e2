package data

import (
	"errors"
	"fmt"
	"image"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/internal/suggest"
)

// File extensions read (case-insensitive). The format itself is told by
// the file's contents.
var (
	imageExts = []string{".png", ".jpg", ".jpeg", ".gif", ".tif", ".tiff"}
	maskExts  = []string{".png", ".gif", ".tif", ".tiff"}
)

// pair is one sample of a file source: an image file and its mask file.
type pair struct {
	id    string // file stem (folder) or list entry (voc)
	image string // path
	mask  string // path
	// more are a nifti case's other modalities, channel 1 on
	// (NAME_0001.nii.gz, ...; image is NAME_0000's); nil for one channel.
	more []string
}

// channels is the pair's image files, channel 0 first.
func (p pair) channels() []string { return append([]string{p.image}, p.more...) }

// Problem is something wrong with the data, naming the file (or folder) it
// is about. A fatal problem stops training; the others are warnings.
type Problem struct {
	File  string
	Msg   string
	Fatal bool
}

func (p Problem) Error() string {
	if p.File == "" {
		return p.Msg
	}
	return p.File + ": " + p.Msg
}

func fatal(file, format string, args ...any) Problem {
	return Problem{File: file, Msg: fmt.Sprintf(format, args...), Fatal: true}
}

func warning(file, format string, args ...any) Problem {
	return Problem{File: file, Msg: fmt.Sprintf(format, args...)}
}

func hasExt(name string, exts []string) bool {
	return slices.Contains(exts, strings.ToLower(filepath.Ext(name)))
}

func stem(name string) string { return strings.TrimSuffix(name, filepath.Ext(name)) }

// readDirFiles lists the regular files (or links to them) of dir by name,
// skipping hidden ones and folders. A link that leads nowhere (a symlink
// loop or a broken link) or to what is not a file, and a named pipe, a
// socket or a device, is a problem naming it: fatal when its name has one
// of exts, since a sample would be lost; else a warning that it is
// ignored. None of them is ever opened (a FIFO would wait for a writer).
func readDirFiles(dir string, exts []string) ([]string, []Problem, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	var probs []Problem
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		var p *Problem
		ok := e.Type().IsRegular()
		if !ok {
			ok, p = statFile(path)
		}
		if p != nil {
			if !hasExt(e.Name(), exts) {
				p.Fatal = false
				p.Msg = "ignored: " + p.Msg
			}
			probs = append(probs, *p)
		}
		if ok {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, probs, nil
}

// isLoop reports whether err is the system's "too many levels of symbolic
// links": following the links of a path never ends.
func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }

// loopProblem is the fatal problem of a path whose symbolic links loop.
func loopProblem(path string) *Problem {
	p := fatal(path, "%s", loopMsg(path))
	return &p
}

// loopMsg says that path is a symlink loop, or lies in a folder that is
// one, with the chain of links, e.g. "(a.png -> b.png -> a.png)".
func loopMsg(path string) string {
	msg := "is a symlink loop: following its symbolic links never reaches a file or folder"
	at := path // the loop: path or the topmost folder above it that loops
	for p := filepath.Dir(path); p != filepath.Dir(p); p = filepath.Dir(p) {
		if _, err := os.Stat(p); isLoop(err) {
			at = p
		}
	}
	if at != path {
		msg = fmt.Sprintf("lies in %s, a symlink loop: following its symbolic links never reaches a folder", at)
	}
	chain := []string{at}
	seen := map[string]bool{at: true}
	for p := at; len(chain) < 10; {
		t, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		chain = append(chain, t)
		if seen[t] {
			break
		}
		seen[t] = true
		p = t
	}
	if len(chain) > 1 {
		msg += " (" + strings.Join(chain, " -> ") + ")"
	}
	return msg + "; fix or remove the link"
}

// statFile reports whether path is a regular file or a link to one. A
// symlink loop, a broken symbolic link, or a named pipe, socket or device
// there is a fatal problem naming it (the dataset lost that file); a
// missing path or a folder is neither.
func statFile(path string) (ok bool, p *Problem) {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return false, nil
	case err == nil && !st.Mode().IsRegular():
		p := fatal(path, "is %s, not a file: a sample must be a regular file; remove it or replace it with the file", infile.Kind(st.Mode()))
		return false, &p
	case err == nil:
		return true, nil
	case isLoop(err):
		return false, loopProblem(path)
	case errors.Is(err, fs.ErrNotExist):
		if target, lerr := os.Readlink(path); lerr == nil {
			p := fatal(path, "is a broken symbolic link: its target %s does not exist; fix or remove the link", target)
			return false, &p
		}
	}
	return false, nil
}

// checkDir returns a problem unless dir is an existing directory; what says
// what the directory should hold.
func checkDir(dir, what string) *Problem {
	st, err := os.Stat(dir)
	switch {
	case isLoop(err):
		return loopProblem(dir)
	case errors.Is(err, fs.ErrNotExist):
		p := fatal(dir, "does not exist; %s%s", nearFolder(dir), what)
		return &p
	case err != nil:
		p := fatal(dir, "cannot open: %v", err)
		return &p
	case !st.IsDir():
		p := fatal(dir, "is not a folder; %s", what)
		return &p
	}
	return nil
}

// nearFolder is "did you mean SIBLING? " for the folder beside the
// missing path whose name is nearest its name (data/shapse:
// data/shapes), or "" if none is near.
func nearFolder(path string) string {
	parent, base := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return ""
	}
	var dirs []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			continue // hidden, or a file: a folder of images is not stat'ed one by one
		}
		if st, err := os.Stat(filepath.Join(parent, e.Name())); err == nil && st.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if near := suggest.Nearest(base, dirs); near != "" && near != base {
		return "did you mean " + filepath.Join(parent, near) + "? "
	}
	return ""
}

// checkLayout is root's images/ and masks/ folders, or the problems of a
// root or either folder that is missing; layout says what root must hold.
func checkLayout(root, layout string) (imgDir, maskDir string, probs []Problem) {
	if p := checkDir(root, "set data.path to the dataset folder ("+layout+")"); p != nil {
		return "", "", []Problem{*p}
	}
	imgDir, maskDir = filepath.Join(root, "images"), filepath.Join(root, "masks")
	for _, d := range []string{imgDir, maskDir} {
		if p := checkDir(d, layout); p != nil {
			probs = append(probs, *p)
		}
	}
	return imgDir, maskDir, probs
}

// listFolder pairs DIR/images/STEM.{png,jpg,jpeg,gif} with
// DIR/masks/STEM+suffix.{png,gif}, sorted by image file name.
func listFolder(root, suffix string) ([]pair, []Problem) {
	imgDir, maskDir, probs := checkLayout(root, "data.source folder reads DIR/images/ and DIR/masks/, an image and its mask matched by file name (see data.mask_suffix)")
	if len(probs) > 0 {
		return nil, probs
	}
	imgNames, imgProbs, err := readDirFiles(imgDir, imageExts)
	if err != nil {
		return nil, []Problem{fatal(imgDir, "cannot list: %v", err)}
	}
	maskNames, maskProbs, err := readDirFiles(maskDir, imageExts)
	if err != nil {
		return nil, []Problem{fatal(maskDir, "cannot list: %v", err)}
	}
	probs = append(imgProbs, maskProbs...)

	// Masks by the image stem they belong to.
	masks := map[string][]string{}
	var unsuffixed []string
	for _, n := range maskNames {
		if !hasExt(n, maskExts) {
			if hasExt(n, imageExts) {
				probs = append(probs, warning(filepath.Join(maskDir, n), "ignored: masks must be PNG, GIF or TIFF (JPEG's lossy compression changes class values)"))
			} else {
				probs = append(probs, warning(filepath.Join(maskDir, n), "ignored: not a .png, .gif, .tif or .tiff file"))
			}
			continue
		}
		s := stem(n)
		if suffix != "" {
			if !strings.HasSuffix(s, suffix) {
				unsuffixed = append(unsuffixed, n)
				continue
			}
			s = strings.TrimSuffix(s, suffix)
		}
		masks[s] = append(masks[s], n)
	}

	var pairs []pair
	used := map[string]bool{}
	byStem := map[string]string{}
	missing := 0
	for _, n := range imgNames {
		if !hasExt(n, imageExts) {
			probs = append(probs, warning(filepath.Join(imgDir, n), "ignored: not a .png, .jpg, .jpeg, .gif, .tif or .tiff file"))
			continue
		}
		s := stem(n)
		img := filepath.Join(imgDir, n)
		if other, dup := byStem[s]; dup {
			probs = append(probs, fatal(img, "has the same name as %s; rename one, since a mask matches an image by name", other))
			continue
		}
		byStem[s] = img
		cands := masks[s]
		switch len(cands) {
		case 0:
			missing++
			probs = append(probs, fatal(img, "has no mask: looked for %s.png, .gif, .tif or .tiff", filepath.Join(maskDir, s+suffix)))
			continue
		case 1:
		default:
			probs = append(probs, fatal(img, "has %d masks, %s; keep one", len(cands), strings.Join(cands, " and ")))
			continue
		}
		used[s] = true
		pairs = append(pairs, pair{id: s, image: img, mask: filepath.Join(maskDir, cands[0])})
	}
	// The common mistake: masks named STEM_mask.png without data.mask_suffix.
	if missing > 0 && len(pairs) == 0 && len(maskNames) > 0 {
		if s := guessSuffix(byStem, maskNames); s != "" && s != suffix {
			probs = append([]Problem{fatal(maskDir, "no mask matches its image by name; the masks look like STEM%s: set data.mask_suffix: %q", s, s)}, probs...)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(masks)) {
		if !used[s] && byStem[s] == "" {
			for _, n := range masks[s] {
				probs = append(probs, warning(filepath.Join(maskDir, n), "has no image (looked for %s.png, .jpg, .jpeg, .gif, .tif or .tiff); ignored", filepath.Join(imgDir, s)))
			}
		}
	}
	for _, n := range unsuffixed {
		probs = append(probs, warning(filepath.Join(maskDir, n), "ignored: its name does not end in data.mask_suffix %q", suffix))
	}
	if len(byStem) == 0 {
		probs = append(probs, fatal(imgDir, "no images: the dataset is empty (looked for .png, .jpg, .jpeg, .gif, .tif and .tiff files)"))
	}
	return pairs, probs
}

// guessSuffix finds the suffix that turns an image stem into a mask stem,
// if the first image has exactly one mask starting with its stem.
func guessSuffix(images map[string]string, maskNames []string) string {
	for _, s := range slices.Sorted(maps.Keys(images)) {
		var found []string
		for _, m := range maskNames {
			if ms := stem(m); strings.HasPrefix(ms, s) && len(ms) > len(s) {
				found = append(found, strings.TrimPrefix(ms, s))
			}
		}
		if len(found) == 1 {
			return found[0]
		}
	}
	return ""
}

func hasFatal(ps []Problem) bool {
	return slices.ContainsFunc(ps, func(p Problem) bool { return p.Fatal })
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// files is the ImageSource of a folder or VOC dataset: sample i is
// pairs[i], its image decoded to RGB (or gray) and its mask's raw values
// mapped to classes by lut.
type files struct {
	desc      string // for String
	pairs     []pair
	channels  int
	classes   int
	lut       []int16 // class of each raw mask value 0..MaxMaskValue; -1: not a class
	mapDesc   string  // how lut was made, for errors
	h, w      int     // the common size; 0 when images differ in size
	maxPixels int
	decodes   *budget // bounds the bytes of concurrent decodes
	contents  string  // Fingerprint.Contents
	// largest is the most pixels of an image (the scan's sizes), deep
	// that some image has 16 bits a channel.
	largest int64
	deep    bool
}

// HeldBytes is what decoding workers samples at once holds: each, at the
// largest image's size, the decoder's picture (4 bytes a pixel, 8 for
// 16-bit images), a float32 copy of every channel (resizing and patches
// make one of the whole image) and the mask (2 bytes a pixel at most),
// within the decode budget.
func (f *files) HeldBytes(workers int) int64 {
	perPixel := int64(4 + 4*f.channels + 2)
	if f.deep {
		perPixel += 4
	}
	held := int64(max(workers, 1)) * f.largest * perPixel
	if f.decodes != nil {
		held = min(held, max(f.decodes.max, f.largest*perPixel))
	}
	return held
}

var _ ImageSource = (*files)(nil)

func (f *files) Len() int         { return len(f.pairs) }
func (f *files) Channels() int    { return f.channels }
func (f *files) Classes() int     { return f.classes }
func (f *files) Size() (h, w int) { return f.h, f.w }
func (f *files) String() string   { return f.desc }

// Name is sample i's id: its image file's stem (folder) or its list id (voc).
func (f *files) Name(i int) string {
	if i < 0 || i >= len(f.pairs) {
		return ""
	}
	return f.pairs[i].id
}

// Image decodes sample i: the image as RGBA (R = G = B = luma for one
// channel; the high byte of 16-bit files) and the mask as class indices.
// Errors name the file.
func (f *files) Image(i int) (*image.RGBA, *image.Gray, error) {
	img, mask, err := f.read(i, func(im *imageFile) (image.Image, error) { return im.decodeImage(f.channels) })
	if err != nil {
		return nil, nil, err
	}
	return img.(*image.RGBA), mask, nil
}

// DeepImage is Image keeping 16 bits per channel (see DeepImager).
func (f *files) DeepImage(i int) (image.Image, *image.Gray, error) {
	return f.read(i, func(im *imageFile) (image.Image, error) {
		img, err := im.decode()
		if err != nil {
			return nil, err
		}
		return toDeep(img, f.channels == 1), nil
	})
}

// read decodes sample i's image with decode and its mask as class indices,
// holding the pair's share of the decode budget while it does.
func (f *files) read(i int, decode func(*imageFile) (image.Image, error)) (image.Image, *image.Gray, error) {
	if i < 0 || i >= len(f.pairs) {
		return nil, nil, fmt.Errorf("data: sample %d out of range [0, %d)", i, len(f.pairs))
	}
	p := f.pairs[i]
	im, mk, err := openPair(p, f.maxPixels)
	if err != nil {
		return nil, nil, err
	}
	defer im.Close()
	defer mk.Close()
	defer f.decodes.acquire(im.imageCost() + mk.maskCost())()
	img, err := decode(im)
	if err != nil {
		return nil, nil, err
	}
	m, err := mk.decodeMask()
	if err != nil {
		return nil, nil, err
	}
	if ib := img.Bounds(); ib.Dx() != m.w || ib.Dy() != m.h {
		return nil, nil, fmt.Errorf("%s is %dx%d (height x width) but its image %s is %dx%d; a mask must be the size of its image",
			p.mask, m.h, m.w, p.image, ib.Dy(), ib.Dx())
	}
	mask, err := m.classes(f.lut, f.mapDesc)
	if err != nil {
		return nil, nil, err
	}
	return img, mask, nil
}

// Sample fills image and mask with sample i, normalized as the package
// does (16-bit files keep their 16 bits); every image must be Size().
func (f *files) Sample(i int, img []float32, mask []uint8) error {
	if f.h == 0 {
		return fmt.Errorf("data: the images differ in size; set data.resize: [H, W] to scale them to one size")
	}
	if err := checkSample(f, i, img, mask); err != nil {
		return err
	}
	// The image becomes floats row by row before the mask is decoded, and
	// the mask's classes go straight into mask: the most held at once is
	// the larger of the two decoders' pictures.
	p := f.pairs[i]
	im, mk, err := openPair(p, f.maxPixels)
	if err != nil {
		return err
	}
	defer im.Close()
	defer mk.Close()
	defer f.decodes.acquire(max(im.decodedBytes()*im.pixels(), mk.maskCost()))()
	oi, err := im.decode()
	if err != nil {
		return err
	}
	if b := oi.Bounds(); b.Dx() != f.w || b.Dy() != f.h {
		return fmt.Errorf("%s is %dx%d (height x width), the other images %dx%d; set data.resize: [H, W] to scale them to one size",
			p.image, b.Dy(), b.Dx(), f.h, f.w)
	}
	normalizeDecoded(oi, f.channels == 1, f.channels, img)
	m, err := mk.decodeMask()
	if err != nil {
		return err
	}
	if m.w != f.w || m.h != f.h {
		return fmt.Errorf("%s is %dx%d (height x width) but its image %s is %dx%d; a mask must be the size of its image",
			p.mask, m.h, m.w, p.image, f.h, f.w)
	}
	return m.classesInto(f.lut, f.mapDesc, mask)
}
