package data

import "testing"

// TestHeldBytesFiles: a folder set holds one decode per worker at the
// largest image's size, within the decode budget, whatever its number of
// samples; resizing and patches hold what their source does.
func TestHeldBytesFiles(t *testing.T) {
	few, many := t.TempDir(), t.TempDir()
	grayFolder(t, few, 3, 20, 30, []uint8{0, 255})
	grayFolder(t, many, 12, 20, 30, []uint8{0, 255})
	perPixel := int64(4 + 4*3 + 2) // picture, float32 copy of 3 channels, mask
	for _, c := range []struct {
		name    string
		cfg     SourceConfig
		workers int
		want    int64
	}{
		{"3 samples, 2 workers", folderConfig(few), 2, 2 * 20 * 30 * perPixel},
		{"12 samples, 2 workers", folderConfig(many), 2, 2 * 20 * 30 * perPixel},
		{"12 samples, 5 workers", folderConfig(many), 5, 5 * 20 * 30 * perPixel},
		{"resized", func() SourceConfig { c := folderConfig(many); c.Resize = []int{8, 8}; return c }(), 2, 2 * 20 * 30 * perPixel},
		{"patches", func() SourceConfig { c := folderConfig(many); c.Patch = []int{8, 8}; return c }(), 2, 2 * 20 * 30 * perPixel},
		{"a budget of one image", func() SourceConfig { c := folderConfig(many); c.DecodeBytes = 20 * 30 * perPixel; return c }(), 4, 20 * 30 * perPixel},
	} {
		if got := HeldBytes(mustOpen(t, c.cfg).Data, c.workers); got != c.want {
			t.Errorf("%s: holds %d bytes, want %d", c.name, got, c.want)
		}
	}
	syn, err := NewSynthetic(SyntheticConfig{Count: 4, Size: 16, Classes: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := HeldBytes(syn, 2); got != 0 {
		t.Errorf("synthetic data holds %d bytes, want 0", got)
	}
}

// TestHeldBytesNIfTI: a nifti set holds its cases in the volume cache (all
// of them, where they fit) and one load per worker: the mask's and the
// image's stored voxels and the case's entry.
func TestHeldBytesNIfTI(t *testing.T) {
	dir := t.TempDir()
	dims := []int{8, 6, 5}
	writeNIfTISet(t, dir, 3, dims)
	set := mustOpen(t, niftiConfig(dir))
	nv := int64(8 * 6 * 5)
	entry := nv * 3             // 16-bit intensity and a class byte
	load := nv*1 + entry + nv*2 // uint8 mask, int16 image
	if got, want := HeldBytes(set.Data, 2), 3*entry+2*load; got != want {
		t.Errorf("holds %d bytes, want %d", got, want)
	}
	if got, want := HeldBytes(set.Data, 1), 3*entry+load; got != want {
		t.Errorf("one worker: holds %d bytes, want %d", got, want)
	}
}
