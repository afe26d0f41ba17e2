package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// castagnoli is CRC32C's table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum: CRC32C rotated right by 15 bits plus a
// constant, so that a CRC of data holding CRCs is not degenerate.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendRecord appends data framed as one record: length, its masked CRC,
// data, data's masked CRC.
func appendRecord(dst, data []byte) []byte {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	dst = append(dst, head[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}

// errTruncated is a file that ends inside a record: what a writer killed
// mid-write leaves.
var errTruncated = errors.New("the file ends inside a record")

// damagedError is a record whose checksum or length fails.
type damagedError struct {
	record int
	offset int64
	what   string
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("record %d (byte %d): %s", e.record, e.offset, e.what)
}

// isDamage reports whether err is a damaged or cut record (the file's
// fault), not a failure to read it.
func isDamage(err error) bool {
	var d *damagedError
	return errors.Is(err, errTruncated) || errors.As(err, &d)
}

// maxRecord bounds a record's length field, so that a corrupt one cannot
// make a reader allocate without limit (memunet's largest are images of a
// few MiB).
const maxRecord = 64 << 20

// recordReader reads the records of size bytes from r one at a time, so
// that reading a file holds its largest record, never the file.
type recordReader struct {
	r    io.Reader
	size int64 // bytes in r
	off  int64 // of the next record
	n    int   // records read
}

// next returns the data of the next whole record (the caller's to keep),
// io.EOF at the end, errTruncated for a record cut short, or an error
// saying where a checksum or a length (over maxRecord) fails. A length is
// checked against the bytes left before its data is allocated.
func (rr *recordReader) next() ([]byte, error) {
	if rr.off == rr.size {
		return nil, io.EOF
	}
	if rr.size-rr.off < 12 {
		return nil, errTruncated
	}
	var head [12]byte
	if _, err := io.ReadFull(rr.r, head[:]); err != nil {
		return nil, rr.cut(err)
	}
	if binary.LittleEndian.Uint32(head[8:]) != maskedCRC(head[:8]) {
		return nil, &damagedError{rr.n, rr.off, "the length's checksum does not match"}
	}
	n := binary.LittleEndian.Uint64(head[:8])
	if n > maxRecord {
		return nil, &damagedError{rr.n, rr.off, fmt.Sprintf("length %d is over the %d-byte limit", n, maxRecord)}
	}
	if uint64(rr.size-rr.off-12) < n+4 {
		return nil, errTruncated
	}
	b := make([]byte, n+4)
	if _, err := io.ReadFull(rr.r, b); err != nil {
		return nil, rr.cut(err)
	}
	data := b[:n:n]
	if binary.LittleEndian.Uint32(b[n:]) != maskedCRC(data) {
		return nil, &damagedError{rr.n, rr.off, "the data's checksum does not match"}
	}
	rr.n++
	rr.off += 12 + int64(n) + 4
	return data, nil
}

// cut is a read error, errTruncated when the input ended early (it was
// cut after its size was taken).
func (rr *recordReader) cut(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errTruncated
	}
	return err
}

// writeRecords writes each of records framed.
func writeRecords(w io.Writer, records [][]byte) error {
	var buf []byte
	for _, r := range records {
		buf = appendRecord(buf[:0], r)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
