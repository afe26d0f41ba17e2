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

// maxRecord bounds a record's length field, so that a corrupt one cannot
// make a reader allocate without limit (memunet's largest are images of a
// few MiB).
const maxRecord = 1 << 30

// readRecords returns the data of each whole record in b, in order, and
// stops at the first record that is cut short (errTruncated) or fails its
// checksum (an error saying where), returning those before it.
func readRecords(b []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			return out, errTruncated
		}
		head := b[off : off+12]
		if binary.LittleEndian.Uint32(head[8:]) != maskedCRC(head[:8]) {
			return out, fmt.Errorf("record %d (byte %d): the length's checksum does not match", len(out), off)
		}
		n := binary.LittleEndian.Uint64(head[:8])
		if n > maxRecord {
			return out, fmt.Errorf("record %d (byte %d): length %d", len(out), off, n)
		}
		if uint64(len(b)-off-12) < n+4 {
			return out, errTruncated
		}
		data := b[off+12 : off+12+int(n)]
		if binary.LittleEndian.Uint32(b[off+12+int(n):]) != maskedCRC(data) {
			return out, fmt.Errorf("record %d (byte %d): the data's checksum does not match", len(out), off)
		}
		out = append(out, data)
		off += 12 + int(n) + 4
	}
	return out, nil
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
