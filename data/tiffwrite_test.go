package data

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"slices"
)

// A TIFF writer built from the TIFF 6.0 specification for the tests, so
// that the reader is held to files golang.org/x/image/tiff's own encoder
// cannot write (tiles, strips of several rows, LZW, PackBits, 3-sample RGB,
// big-endian, several pages) and was not written by the code it tests.

// tiffSpec describes a file: its pixels and how they are stored.
type tiffSpec struct {
	bigEndian    bool
	w, h         int
	samples      int         // per pixel: 1 (gray, palette) or 3 (RGB)
	bits         int         // per sample: 8 or 16
	photometric  int         // 0 WhiteIsZero, 1 BlackIsZero, 2 RGB, 3 palette
	palette      []uint16    // photometric 3: 3 * 2^bits entries (all reds, then greens, then blues)
	compression  int         // 1 none, 5 LZW, 8 Deflate, 32773 PackBits (0: 1)
	predictor    int         // 2: horizontal differencing (0: none)
	tileW, tileH int         // 0: striped
	rowsPerStrip int         // striped: rows per strip (0: all)
	pages        int         // copies of the image in the file (0: 1)
	reduced      bool        // pages after the first are flagged reduced-resolution
	extra        []tiffEntry // entries added, or replacing those of the same tag
	pix          []uint16    // w*h*samples values, row-major, samples interleaved
}

// byteOrder puts and appends numbers in one order.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

func (s tiffSpec) order() byteOrder {
	if s.bigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// block returns the raw (uncompressed) bytes of the w x h block at (x0,
// y0), padded with zeros past the image, predictor applied.
func (s tiffSpec) block(x0, y0, w, h int) []byte {
	vals := make([]uint16, 0, w*h*s.samples)
	for y := y0; y < y0+h; y++ {
		row := make([]uint16, w*s.samples)
		for x := x0; x < x0+w && y < s.h; x++ {
			if x < s.w {
				copy(row[(x-x0)*s.samples:], s.pix[(y*s.w+x)*s.samples:(y*s.w+x+1)*s.samples])
			}
		}
		if s.predictor == 2 { // each sample minus the same sample of the pixel before, modulo 2^bits
			for k := len(row) - 1; k >= s.samples; k-- {
				row[k] -= row[k-s.samples]
				if s.bits == 8 {
					row[k] &= 0xff
				}
			}
		}
		vals = append(vals, row...)
	}
	var out []byte
	for _, v := range vals {
		if s.bits == 8 {
			out = append(out, byte(v))
		} else {
			out = s.order().AppendUint16(out, v)
		}
	}
	return out
}

// compress packs a block as the spec's compression says; rowBytes is a
// row's length (PackBits packs each row apart).
func (s tiffSpec) compress(raw []byte, rowBytes int) []byte {
	switch s.compression {
	case 0, 1:
		return raw
	case 5:
		return lzwTIFF(raw)
	case 8:
		var b bytes.Buffer
		z := zlib.NewWriter(&b)
		z.Write(raw)
		z.Close()
		return b.Bytes()
	case 32773:
		var out []byte
		for r := 0; r < len(raw); r += rowBytes {
			out = append(out, packBits(raw[r:r+rowBytes])...)
		}
		return out
	}
	panic("tiffSpec: compression")
}

// packBits is the PackBits encoding of one row (TIFF 6.0 section 9): runs
// of 3 to 128 equal bytes as a repeat, the rest as literals of up to 128.
func packBits(row []byte) []byte {
	var out, lit []byte
	flush := func() {
		for len(lit) > 0 {
			n := min(len(lit), 128)
			out = append(out, byte(n-1))
			out = append(out, lit[:n]...)
			lit = lit[n:]
		}
	}
	for i := 0; i < len(row); {
		run := 1
		for i+run < len(row) && run < 128 && row[i+run] == row[i] {
			run++
		}
		if run >= 3 {
			flush()
			out = append(out, byte(int8(1-run)), row[i])
		} else {
			lit = append(lit, row[i:i+run]...)
		}
		i += run
	}
	flush()
	return out
}

// lzwTIFF is TIFF's LZW (section 13): codes of 9 to 12 bits, most
// significant bit first, Clear (256) first and whenever the table fills,
// EndOfInformation (257) last; a code is written one bit wider as soon as
// the next table entry needs it (the "early change" that sets TIFF's LZW
// apart from GIF's).
func lzwTIFF(data []byte) []byte {
	const clearCode, eoi = 256, 257
	var out []byte
	var acc uint32
	var nacc uint
	put := func(code, width int) {
		acc = acc<<width | uint32(code)
		nacc += uint(width)
		for nacc >= 8 {
			out = append(out, byte(acc>>(nacc-8)))
			nacc -= 8
		}
	}
	width := func(next int) int {
		w := 9
		for next >= 1<<w && w < 12 {
			w++
		}
		return w
	}
	table := map[int]int{} // prefix code << 8 | byte -> code
	next := 258
	put(clearCode, 9)
	prefix := -1
	for _, c := range data {
		if prefix < 0 {
			prefix = int(c)
			continue
		}
		if code, ok := table[prefix<<8|int(c)]; ok {
			prefix = code
			continue
		}
		put(prefix, width(next))
		table[prefix<<8|int(c)] = next
		next++
		if next == 4093 {
			put(clearCode, width(next))
			clear(table)
			next = 258
		}
		prefix = int(c)
	}
	if prefix >= 0 {
		put(prefix, width(next))
		next++
	}
	put(eoi, width(next))
	if nacc > 0 {
		out = append(out, byte(acc<<(8-nacc)))
	}
	return out
}

// tiffEntry is one directory entry: a tag, its type (3 SHORT, 4 LONG) and
// values.
type tiffEntry struct {
	tag, typ int
	vals     []uint32
}

// bytes is the file.
func (s tiffSpec) bytes() []byte {
	bo := s.order()
	out := []byte("II*\x00\x00\x00\x00\x00")
	if s.bigEndian {
		out = []byte("MM\x00*\x00\x00\x00\x00")
	}
	bytesPer := s.bits / 8 * s.samples
	var offsets, counts []uint32
	add := func(raw []byte, rowBytes int) {
		c := s.compress(raw, rowBytes)
		offsets = append(offsets, uint32(len(out)))
		counts = append(counts, uint32(len(c)))
		out = append(out, c...)
		if len(out)%2 == 1 { // word alignment, as writers do
			out = append(out, 0)
		}
	}
	if s.tileW > 0 {
		for ty := 0; ty < s.h; ty += s.tileH {
			for tx := 0; tx < s.w; tx += s.tileW {
				add(s.block(tx, ty, s.tileW, s.tileH), s.tileW*bytesPer)
			}
		}
	} else {
		rps := cmp0(s.rowsPerStrip, s.h)
		for y := 0; y < s.h; y += rps {
			add(s.block(0, y, s.w, min(rps, s.h-y)), s.w*bytesPer)
		}
	}
	bits := make([]uint32, s.samples)
	for k := range bits {
		bits[k] = uint32(s.bits)
	}
	entries := []tiffEntry{
		{256, 4, []uint32{uint32(s.w)}},
		{257, 4, []uint32{uint32(s.h)}},
		{258, 3, bits},
		{259, 3, []uint32{uint32(cmp0(s.compression, 1))}},
		{262, 3, []uint32{uint32(s.photometric)}},
		{277, 3, []uint32{uint32(s.samples)}},
	}
	if s.tileW > 0 {
		entries = append(entries, tiffEntry{322, 4, []uint32{uint32(s.tileW)}}, tiffEntry{323, 4, []uint32{uint32(s.tileH)}},
			tiffEntry{324, 4, offsets}, tiffEntry{325, 4, counts})
	} else {
		entries = append(entries, tiffEntry{273, 4, offsets}, tiffEntry{278, 4, []uint32{uint32(cmp0(s.rowsPerStrip, s.h))}},
			tiffEntry{279, 4, counts})
	}
	if s.predictor != 0 {
		entries = append(entries, tiffEntry{317, 3, []uint32{uint32(s.predictor)}})
	}
	if s.palette != nil {
		cm := make([]uint32, len(s.palette))
		for k, v := range s.palette {
			cm[k] = uint32(v)
		}
		entries = append(entries, tiffEntry{320, 3, cm})
	}
	for _, e := range s.extra {
		entries = slices.DeleteFunc(entries, func(o tiffEntry) bool { return o.tag == e.tag })
		entries = append(entries, e)
	}
	pages := cmp0(s.pages, 1)
	bo.PutUint32(out[4:], uint32(len(out)))
	for p := range pages {
		es := slices.Clone(entries)
		if p > 0 && s.reduced {
			es = append([]tiffEntry{{254, 4, []uint32{1}}}, es...)
		}
		slices.SortFunc(es, func(a, b tiffEntry) int { return a.tag - b.tag })
		ifd := len(out)
		extra := ifd + 2 + 12*len(es) + 4 // values too long for an entry go after the directory
		var tail []byte
		out = bo.AppendUint16(out, uint16(len(es)))
		for _, e := range es {
			size := map[int]int{3: 2, 4: 4}[e.typ]
			out = bo.AppendUint16(out, uint16(e.tag))
			out = bo.AppendUint16(out, uint16(e.typ))
			out = bo.AppendUint32(out, uint32(len(e.vals)))
			var val []byte
			for _, v := range e.vals {
				if size == 2 {
					val = bo.AppendUint16(val, uint16(v))
				} else {
					val = bo.AppendUint32(val, v)
				}
			}
			if len(val) <= 4 {
				out = append(out, append(val, make([]byte, 4-len(val))...)...)
			} else {
				out = bo.AppendUint32(out, uint32(extra+len(tail)))
				tail = append(tail, val...)
			}
		}
		next := 0
		if p < pages-1 {
			next = extra + len(tail)
		}
		out = bo.AppendUint32(out, uint32(next))
		out = append(out, tail...)
	}
	return out
}

// cmp0 is v, or def when v is 0.
func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
