package tensorboard

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/internal/childtest"
)

// sparseEvents writes in dir two event files of steps 1 to 4 that run on,
// sparse, to 2 GiB: one into zeros (a damaged length), one into a record
// whose length (its checksum right) claims 128 MiB, over maxRecord.
func sparseEvents(t testing.TB, dir string) []string {
	t.Helper()
	w := open(filepath.Join(dir, "tb"), 0, nil, clock())
	for step := int64(1); step <= 4; step++ {
		w.Scalars(step, scalarsAt(step))
	}
	w.Close()
	events, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i, tail := range [][]byte{nil, lengthOnly(128 << 20)} {
		path := filepath.Join(dir, "tb", FilePrefix+strconv.Itoa(1_800_000_000+i)+".host.1")
		if err := os.WriteFile(path, append(bytes.Clone(events), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 2<<30); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	if err := os.Remove(w.Path()); err != nil {
		t.Fatal(err)
	}
	return paths
}

// lengthOnly is a record's head claiming n bytes of data, checksum right.
func lengthOnly(n uint64) []byte {
	head := binary.LittleEndian.AppendUint64(nil, n)
	return binary.LittleEndian.AppendUint32(head, maskedCRC(head))
}

// resumeSparse resumes at step 2 in dir and checks that each file was cut
// back to its records up to step 2, each with a warning naming its damage.
func resumeSparse(t testing.TB, dir string, paths []string) {
	t.Helper()
	var warnings []string
	w := open(filepath.Join(dir, "tb"), 2, func(s string) { warnings = append(warnings, s) }, clock())
	w.Close()
	if len(warnings) != len(paths) || !strings.Contains(strings.Join(warnings, "\n"), "the records from there on are dropped") {
		t.Errorf("warnings: %v; want one a damaged file", warnings)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := readRecords(b)
		if err != nil || len(recs) != 3 { // the file version, steps 1 and 2
			t.Errorf("%s: %d bytes, %d records (%v); want the version and steps 1 and 2", filepath.Base(p), len(b), len(recs), err)
		}
	}
}

// TestResumeReadsEventsInBoundedMemory: a resume rolls back event files
// of 2 GiB (sparse: a few KiB on disk) record by record, in a child
// process whose peak RSS stays under 100 MB: the files end in damage
// (zeros, a length over maxRecord) that is dropped as a cut record is.
// Reading each file whole took 2 GiB.
func TestResumeReadsEventsInBoundedMemory(t *testing.T) {
	if dir := os.Getenv("MEMUNET_TB_BOUNDED_CHILD"); dir != "" {
		defer childtest.ReportPeak(t)
		resumeSparse(t, dir, sparseEvents(t, dir))
		return
	}
	_, peak := childtest.PeakRSS(t, "TestResumeReadsEventsInBoundedMemory", "MEMUNET_TB_BOUNDED_CHILD", t.TempDir(), 2*time.Minute)
	t.Logf("child peak RSS %.1f MB", float64(peak)/1e6)
	if peak >= 100e6 {
		t.Errorf("child peak RSS %d bytes, want under 100 MB", peak)
	}
}
