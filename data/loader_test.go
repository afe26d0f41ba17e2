package data

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func loaderBuffers(ds Dataset, batch int) ([]float32, []uint8) {
	h, w := ds.Size()
	return make([]float32, batch*ds.Channels()*h*w), make([]uint8, batch*h*w)
}

// want is micro-batch m filled directly, without the loader.
func directBatch(t *testing.T, ds Dataset, idx []int, cfg LoaderConfig, m int) ([]float32, []uint8, int) {
	t.Helper()
	epoch, pos := m/cfg.PerEpoch, m%cfg.PerEpoch
	order := Shuffle(idx, cfg.Seed, epoch)
	img, mask := loaderBuffers(ds, cfg.Batch)
	if err := FillBatch(ds, order[pos*cfg.Batch:(pos+1)*cfg.Batch], img, mask); err != nil {
		t.Fatal(err)
	}
	return img, mask, epoch + 1
}

func TestLoaderOrderIsDeterministic(t *testing.T) {
	syn := mustSynthetic(t, SyntheticConfig{Count: 23, Size: 16, Seed: 3})
	idx, _ := Split(23, 0.2, 1)
	cfg := LoaderConfig{Batch: 3, PerEpoch: len(idx) / 3, Seed: 7, Prefetch: 2}
	l, err := NewLoader(syn, idx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	img, mask := loaderBuffers(syn, 3)
	// Sequential over three epochs, then jumps back and forth (a resume, a
	// step run again after an out-of-memory error), then sequential again.
	seq := []int{}
	for m := range 3 * cfg.PerEpoch {
		seq = append(seq, m)
	}
	seq = append(seq, 4, 5, 6, 2, 2, 3, 17, 0, 1, 2, 3)
	for _, m := range seq {
		epoch, err := l.Batch(m, img, mask)
		if err != nil {
			t.Fatal(err)
		}
		wi, wm, we := directBatch(t, syn, idx, cfg, m)
		if epoch != we || !slices.Equal(img, wi) || !slices.Equal(mask, wm) {
			t.Fatalf("micro-batch %d: epoch %d (want %d), or its samples differ from the direct fill", m, epoch, we)
		}
	}
	if e, p := l.Position(2*cfg.PerEpoch + 1); e != 2 || p != 1 {
		t.Errorf("Position: epoch %d pos %d", e, p)
	}
	if got := l.Samples(cfg.PerEpoch); !slices.Equal(got, Shuffle(idx, 7, 1)[:3]) {
		t.Errorf("Samples(first of epoch 2) = %v", got)
	}
	// A second loader, started mid-way (resumed), agrees.
	l2, _ := NewLoader(syn, idx, cfg)
	defer l2.Close()
	img2, mask2 := loaderBuffers(syn, 3)
	for m := 7; m < 12; m++ {
		if _, err := l.Batch(m, img, mask); err != nil {
			t.Fatal(err)
		}
		if _, err := l2.Batch(m, img2, mask2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(img, img2) || !slices.Equal(mask, mask2) {
			t.Fatalf("resumed loader differs at micro-batch %d", m)
		}
	}
}

func TestLoaderFlip(t *testing.T) {
	syn := mustSynthetic(t, SyntheticConfig{Count: 16, Size: 16, Seed: 5})
	idx := seq(0, 16)
	cfg := LoaderConfig{Batch: 4, PerEpoch: 4, Seed: 2, Flip: true}
	l, err := NewLoader(syn, idx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	img, mask := loaderBuffers(syn, 4)
	flips := map[[2]int]bool{}
	nflip := 0
	for m := range 3 * cfg.PerEpoch {
		if _, err := l.Batch(m, img, mask); err != nil {
			t.Fatal(err)
		}
		epoch, _ := l.Position(m)
		for b, i := range l.Samples(m) {
			wi, wm := sample(t, syn, i)
			f := l.Flipped(epoch, i)
			flips[[2]int{epoch, i}] = f
			if f {
				nflip++
				for ch := range 3 {
					for y := range 16 {
						slices.Reverse(wi[ch*256+y*16 : ch*256+(y+1)*16])
					}
				}
				for y := range 16 {
					slices.Reverse(wm[y*16 : (y+1)*16])
				}
			}
			if !slices.Equal(img[b*3*256:(b+1)*3*256], wi) || !slices.Equal(mask[b*256:(b+1)*256], wm) {
				t.Fatalf("micro-batch %d position %d (sample %d, flipped %v) differs", m, b, i, f)
			}
		}
	}
	// About half flipped, and not the same samples every epoch.
	if nflip < 12 || nflip > 36 {
		t.Errorf("%d of 48 samples flipped", nflip)
	}
	same := 0
	for i := range 16 {
		if flips[[2]int{0, i}] == flips[[2]int{1, i}] {
			same++
		}
	}
	if same == 16 {
		t.Error("every sample flipped the same way in epochs 1 and 2")
	}
	cfg.Flip = false
	plain, _ := NewLoader(syn, idx, cfg)
	for i := range 16 {
		if plain.Flipped(0, i) {
			t.Fatal("Flipped without data.flip")
		}
	}
}

func TestLoaderErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	grayFolder(t, dir, 8, 16, 16, []uint8{0, 255})
	set := mustOpen(t, folderConfig(dir))
	cfg := LoaderConfig{Batch: 2, PerEpoch: 3, Seed: 1}
	l, err := NewLoader(set.Data, set.Train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	img, mask := loaderBuffers(set.Data, 2)
	if _, err := l.Batch(0, img, mask); err != nil {
		t.Fatal(err)
	}
	// Break a file used later in the first epoch.
	victim := l.Samples(2)[1]
	name := filepath.Join(dir, "images", filepath.Base(set.Data.(*files).pairs[victim].image))
	b, _ := os.ReadFile(name)
	writeFile(t, name, b[:len(b)/2])
	l.Close() // drop what was decoded ahead
	var gotErr error
	for m := 0; m < 3 && gotErr == nil; m++ {
		_, gotErr = l.Batch(m, img, mask)
	}
	if gotErr == nil || !strings.Contains(gotErr.Error(), name) || !strings.Contains(gotErr.Error(), "epoch 1, micro-batch 3") {
		t.Fatalf("error %v does not name %s and the micro-batch", gotErr, name)
	}
	// The loader recovers once the file is fixed.
	writeFile(t, name, b)
	if _, err := l.Batch(2, img, mask); err != nil {
		t.Fatalf("after fixing the file: %v", err)
	}
}

func TestLoaderArguments(t *testing.T) {
	syn := mustSynthetic(t, SyntheticConfig{Count: 8, Size: 16})
	for _, cfg := range []LoaderConfig{{Batch: 0, PerEpoch: 1}, {Batch: 3, PerEpoch: 3}, {Batch: 2, PerEpoch: 0}} {
		if _, err := NewLoader(syn, seq(0, 8), cfg); err == nil {
			t.Errorf("NewLoader(%+v) accepted", cfg)
		}
	}
	l, _ := NewLoader(syn, seq(0, 8), LoaderConfig{Batch: 2, PerEpoch: 4})
	defer l.Close()
	img, mask := loaderBuffers(syn, 2)
	if _, err := l.Batch(0, img[:10], mask); err == nil {
		t.Error("short buffer accepted")
	}
	if _, err := l.Batch(-1, img, mask); err == nil {
		t.Error("negative micro-batch accepted")
	}
	l.Close()
	l.Close() // twice is fine
}
