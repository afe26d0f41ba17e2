package data

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	_ "golang.org/x/image/tiff" // registers "tiff" with image.Decode
)

// TIFF tags read by tiffHeader (TIFF 6.0, section 8 and the tag index).
const (
	tagNewSubfileType = 254
	tagImageWidth     = 256
	tagImageLength    = 257
	tagBitsPerSample  = 258
	tagCompression    = 259
	tagPhotometric    = 262
	tagSamplesPerPix  = 277
	tagPlanarConfig   = 284
	tagPredictor      = 317
	tagTileWidth      = 322
	tagTileLength     = 323
	tagSampleFormat   = 339
)

// tiffCompressions are the compressions golang.org/x/image/tiff decodes,
// by their tag value.
var tiffCompressions = map[int]string{
	1: "uncompressed", 2: "CCITT RLE", 3: "CCITT G3", 4: "CCITT G4",
	5: "LZW", 8: "Deflate", 32946: "Deflate", 32773: "PackBits",
}

// tiffOtherCompressions names compressions it does not, for the error.
var tiffOtherCompressions = map[int]string{
	6: "old-style JPEG", 7: "JPEG", 34712: "JPEG 2000", 34887: "LERC", 34925: "LZMA",
	50000: "Zstandard", 50001: "WebP", 50002: "JPEG XL",
}

// maxTIFFPages bounds the pages counted when a file is refused for having
// more than one (a loop of IFD offsets would otherwise never end).
const maxTIFFPages = 10000

// tiffInfo is what a TIFF's first image file directory says about its
// picture, read without decoding it.
type tiffInfo struct {
	width, height int
	bits          []int // bits per sample, one per sample
	photometric   int   // 0 WhiteIsZero, 1 BlackIsZero, 2 RGB, 3 palette, ...
	compression   int
	planar        int // 1 interleaved (chunky), 2 separate planes
	sampleFormat  int // 1 unsigned, 2 signed, 3 floating point
	predictor     int
	tileW, tileH  int // 0 for a striped file
	pages         int // images in the file (top-level IFDs), at least 1
	reduced       int // of pages-1 others, those flagged reduced-resolution (pyramid levels, thumbnails)
}

// isTIFF reports whether b starts with a TIFF or BigTIFF signature.
func isTIFF(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	s := string(b[:4])
	return s == "II*\x00" || s == "MM\x00*" || s == "II+\x00" || s == "MM\x00+"
}

// tiffHeader is tiffHeaderAt over bytes in memory.
func tiffHeader(b []byte) (tiffInfo, error) { return tiffHeaderAt(bytes.NewReader(b), int64(len(b))) }

// tiffBytes is a TIFF file of size bytes, read where its header points.
type tiffBytes struct {
	r    io.ReaderAt
	size int64
}

// at is the n bytes at off, nil when they pass the end of the file.
func (t tiffBytes) at(off, n int64) []byte {
	if off < 0 || n < 0 || off+n > t.size {
		return nil
	}
	b := make([]byte, n)
	if _, err := t.r.ReadAt(b, off); err != nil && !(err == io.EOF && off+n == t.size) {
		return nil
	}
	return b
}

// tiffHeaderAt reads a TIFF's first image file directory and counts the
// directories chained after it, reading only the header and directories
// (a few KiB) of the size bytes at r. The error says what is wrong with
// the file in words (the caller adds its name).
func tiffHeaderAt(r io.ReaderAt, size int64) (tiffInfo, error) {
	file := tiffBytes{r, size}
	b := file.at(0, 8)
	if b == nil {
		return tiffInfo{}, fmt.Errorf("the TIFF file is truncated (it ends inside its 8-byte header)")
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if b[0] == 'M' {
		bo = binary.BigEndian
	}
	switch bo.Uint16(b[2:]) {
	case 42:
	case 43:
		return tiffInfo{}, fmt.Errorf("is a BigTIFF file, which memunet does not read; save it as a classic TIFF (under 4 GiB), or cut it into files that are")
	default:
		return tiffInfo{}, fmt.Errorf("is not a TIFF file: its header says version %d, not 42", bo.Uint16(b[2:]))
	}
	info := tiffInfo{planar: 1, sampleFormat: 1, predictor: 1, compression: 1, photometric: -1}
	ifd := int64(bo.Uint32(b[4:]))
	seen := map[int64]bool{}
	for info.pages = 0; ifd != 0; info.pages++ {
		if info.pages == maxTIFFPages || seen[ifd] {
			break // a loop or a hostile chain: enough pages to refuse the file
		}
		seen[ifd] = true
		count := file.at(ifd, 2)
		if count == nil {
			if info.pages == 0 {
				return tiffInfo{}, fmt.Errorf("the TIFF file is truncated (its image directory at byte %d lies past its end, %d bytes)", ifd, size)
			}
			break // a damaged chain after the first page: still more than one page
		}
		n := int64(bo.Uint16(count))
		dir := file.at(ifd+2, 12*n+4) // the entries and the next directory's offset
		if dir == nil {
			if info.pages == 0 {
				return tiffInfo{}, fmt.Errorf("the TIFF file is truncated (it ends inside its image directory)")
			}
			break
		}
		for e := int64(0); e < 12*n; e += 12 {
			entry := dir[e : e+12]
			tag, vals := int(bo.Uint16(entry)), tiffValues(file, bo, entry)
			if info.pages > 0 {
				if tag == tagNewSubfileType && len(vals) > 0 && vals[0]&1 != 0 {
					info.reduced++
				}
				continue
			}
			first := 0
			if len(vals) > 0 {
				first = vals[0]
			}
			switch tag {
			case tagImageWidth:
				info.width = first
			case tagImageLength:
				info.height = first
			case tagBitsPerSample:
				info.bits = vals
			case tagCompression:
				info.compression = first
			case tagPhotometric:
				info.photometric = first
			case tagPlanarConfig:
				info.planar = first
			case tagPredictor:
				info.predictor = first
			case tagTileWidth:
				info.tileW = first
			case tagTileLength:
				info.tileH = first
			case tagSampleFormat:
				info.sampleFormat = first
			case tagSamplesPerPix:
				if len(info.bits) == 0 && first > 1 && first <= 16 {
					info.bits = make([]int, first) // filled below if BitsPerSample is absent
				}
			}
		}
		ifd = int64(bo.Uint32(dir[12*n:]))
	}
	if info.pages == 0 {
		return tiffInfo{}, fmt.Errorf("the TIFF file holds no image (its first image directory offset is 0)")
	}
	if len(info.bits) == 0 {
		info.bits = []int{1} // the spec's default
	}
	for k, v := range info.bits {
		if v == 0 {
			info.bits[k] = info.bits[0]
		}
	}
	return info, nil
}

// tiffValues is the values of a 12-byte directory entry when they are
// BYTEs, SHORTs or LONGs (at most 16 of them: tiffHeaderAt needs no longer
// list), else nil.
func tiffValues(file tiffBytes, bo binary.ByteOrder, entry []byte) []int {
	typ, count := bo.Uint16(entry[2:]), int64(bo.Uint32(entry[4:]))
	size := map[uint16]int64{1: 1, 3: 2, 4: 4}[typ]
	if size == 0 || count == 0 {
		return nil
	}
	vals := entry[8:12]
	count = min(count, 16)
	if size*count > 4 {
		if vals = file.at(int64(bo.Uint32(entry[8:])), size*count); vals == nil {
			return nil
		}
	}
	out := make([]int, count)
	for k := range out {
		p := vals[int64(k)*size:]
		switch size {
		case 1:
			out[k] = int(p[0])
		case 2:
			out[k] = int(bo.Uint16(p))
		default:
			out[k] = int(bo.Uint32(p))
		}
	}
	return out
}

// kind names the picture: "gray", "RGB", "palette", ...
func (t tiffInfo) kind() string {
	switch t.photometric {
	case 0, 1:
		if len(t.bits) == 2 {
			return "gray+alpha"
		}
		return "gray"
	case 2:
		if len(t.bits) == 4 {
			return "RGBA"
		}
		return "RGB"
	case 3:
		return "palette"
	case 4:
		return "transparency mask"
	case 5:
		return "CMYK"
	case 6:
		return "YCbCr"
	case 8:
		return "CIE L*a*b*"
	}
	return fmt.Sprintf("photometric %d", t.photometric)
}

// format names the file for people: "16-bit gray TIFF (tiled 256x256,
// LZW)".
func (t tiffInfo) format() string {
	layout := "striped"
	if t.tileW > 0 {
		layout = fmt.Sprintf("tiled %dx%d", t.tileW, t.tileH)
	}
	comp := tiffCompressions[t.compression]
	if comp == "" {
		comp = tiffOtherCompressions[t.compression]
	}
	if comp == "" {
		comp = fmt.Sprintf("compression %d", t.compression)
	}
	return fmt.Sprintf("%d-bit %s TIFF (%s, %s)", t.bits[0], t.kind(), layout, comp)
}

// check refuses what golang.org/x/image/tiff would misread or refuse with
// a terse error: more than one page, separate planes, samples that are not
// unsigned integers, depths and compressions it does not decode. The
// error says what to do.
func (t tiffInfo) check() error {
	convert := "convert it to an 8- or 16-bit unsigned gray, RGB or palette TIFF (e.g. with ImageJ, tifffile or libvips)"
	switch {
	case t.pages > 1:
		pages := fmt.Sprintf("%d pages", t.pages)
		if t.pages >= maxTIFFPages {
			pages = fmt.Sprintf("at least %d pages", t.pages)
		}
		what := "a stack or a multi-page scan"
		if t.reduced == t.pages-1 {
			what = "a pyramid: the first page and smaller copies"
		}
		return fmt.Errorf("is a multi-page TIFF (%s, %s), and memunet reads one image per file; save the page to train on as its own TIFF (e.g. tiffsplit, or ImageJ's Stack to Images), or a volume as NIfTI for data.source: nifti", pages, what)
	case t.planar == 2 && len(t.bits) > 1:
		return fmt.Errorf("stores its %d channels in separate planes (PlanarConfiguration 2), which memunet does not read; re-save it with interleaved channels (e.g. tiffcp -p contig)", len(t.bits))
	case t.sampleFormat == 2:
		return fmt.Errorf("holds signed integer samples (SampleFormat 2), which memunet does not read; %s", convert)
	case t.sampleFormat == 3:
		return fmt.Errorf("holds floating-point samples (SampleFormat 3), which memunet does not read; %s", convert)
	case t.sampleFormat != 1:
		return fmt.Errorf("holds samples of SampleFormat %d, which memunet does not read; %s", t.sampleFormat, convert)
	case tiffCompressions[t.compression] == "":
		name := tiffOtherCompressions[t.compression]
		if name == "" {
			name = "an unknown compression"
		}
		return fmt.Errorf("uses %s (Compression %d), which memunet does not read; re-save it uncompressed or with LZW, Deflate or PackBits (e.g. tiffcp -c lzw)", name, t.compression)
	case t.predictor == 3:
		return fmt.Errorf("uses the floating-point predictor (Predictor 3), which memunet does not read; re-save it without a predictor or with the horizontal one")
	}
	switch t.photometric {
	case 0, 1, 3:
		if len(t.bits) > 1 {
			return fmt.Errorf("is a %s TIFF with %d samples per pixel (extra channels such as alpha), which memunet does not read; save it with one sample per pixel", t.kind(), len(t.bits))
		}
	case 2:
	default:
		return fmt.Errorf("is a %s TIFF, which memunet does not read; %s", t.kind(), convert)
	}
	for _, b := range t.bits {
		if b != t.bits[0] || (b != 1 && b != 8 && b != 16) {
			return fmt.Errorf("has %s bits per sample, which memunet does not read (it reads 1, 8 and 16); %s", joinInts(t.bits), convert)
		}
	}
	return nil
}

func joinInts(vs []int) string {
	parts := make([]string, len(vs))
	for k, v := range vs {
		parts[k] = fmt.Sprint(v)
	}
	return strings.Join(parts, "/")
}

// checkTIFF reads the header of a TIFF of size bytes at r and refuses what
// memunet cannot read right; the error starts with name.
func checkTIFF(name string, r io.ReaderAt, size int64) (tiffInfo, error) {
	t, err := tiffHeaderAt(r, size)
	if err == nil {
		err = t.check()
	}
	if err != nil {
		return t, fmt.Errorf("%s: %v", name, err)
	}
	return t, nil
}
