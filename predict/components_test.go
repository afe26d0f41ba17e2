package predict

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
)

// grid is rows of digits as classes, a picture of dims [len(row), rows, 1];
// slices of a volume are such grids one after another (z).
func grid(slicesOf ...[]string) ([]uint8, [3]int) {
	var out []uint8
	for _, rows := range slicesOf {
		for _, r := range rows {
			for _, c := range r {
				out = append(out, uint8(c-'0'))
			}
		}
	}
	return out, [3]int{len(slicesOf[0][0]), len(slicesOf[0]), len(slicesOf)}
}

// TestKeepLargest2D: of each class asked for, exactly its largest
// 4-connected component stays (a pixel touching it by a corner is
// another component; of two of one size the first in pixel order), the
// rest becomes the background; a class not asked for stays as it was.
func TestKeepLargest2D(t *testing.T) {
	in := []string{
		"11000220",
		"11000220",
		"10100000",
		"00000000",
		"33000022",
		"33011022",
	}
	for _, tc := range []struct {
		keep    []bool
		want    []string
		changed int64
	}{
		{[]bool{false, true, true, false}, []string{
			"11000220",
			"11000220",
			"10000000",
			"00000000",
			"33000000",
			"33000000",
		}, 7},
		{[]bool{true, true, false, true}, []string{ // the background's flag is passed over
			"11000220",
			"11000220",
			"10000000",
			"00000000",
			"33000022",
			"33000022",
		}, 3},
	} {
		classes, dims := grid(in)
		changed, err := KeepLargest(classes, dims, tc.keep, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := grid(tc.want)
		if !slices.Equal(classes, want) || changed != tc.changed {
			t.Errorf("keep %v: changed %d (want %d)\n%s\nwant\n%s", tc.keep, changed, tc.changed, show(classes, dims), strings.Join(tc.want, "\n"))
		}
	}
	classes, dims := grid(in)
	if _, err := KeepLargest(classes[1:], dims, []bool{false, true}, 0); err == nil {
		t.Error("classes of the wrong size were taken")
	}
}

// TestKeepLargest3D: 6-connected: a column joined only across slices is
// one component, voxels touching by an edge are not; the removed voxels
// become the background given (class 3 here), and ties keep the first in
// voxel order.
func TestKeepLargest3D(t *testing.T) {
	classes, dims := grid(
		[]string{
			"1000",
			"0100",
			"0022",
			"0022",
		},
		[]string{
			"1000",
			"0000",
			"0000",
			"0001",
		},
		[]string{
			"1022",
			"0022",
			"0000",
			"0001",
		},
	)
	want, _ := grid(
		[]string{
			"1000",
			"0300",
			"0022",
			"0022",
		},
		[]string{
			"1000",
			"0000",
			"0000",
			"0003",
		},
		[]string{
			"1033",
			"0033",
			"0000",
			"0003",
		},
	)
	changed, err := KeepLargest(classes, dims, []bool{false, true, true}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(classes, want) || changed != 7 {
		t.Errorf("changed %d\n%s\nwant\n%s", changed, show(classes, dims), show(want, dims))
	}
}

// TestKeepLargestMatchesReference: on random masks (pictures and
// volumes), KeepLargest keeps what a plain labelling of the components
// keeps.
func TestKeepLargestMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dims := range [][3]int{{17, 13, 1}, {9, 7, 6}, {1, 1, 1}, {31, 1, 1}, {6, 5, 11}} {
		n := dims[0] * dims[1] * dims[2]
		classes := make([]uint8, n)
		for i := range classes {
			classes[i] = uint8(rng.IntN(4))
		}
		want := slices.Clone(classes)
		keep := []bool{false, true, false, true}
		referenceLargest(want, dims, keep, 0)
		if _, err := KeepLargest(classes, dims, keep, 0); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(classes, want) {
			t.Errorf("%v: differs from the reference\n%s\nwant\n%s", dims, show(classes, dims), show(want, dims))
		}
	}
}

// referenceLargest labels every component by a depth-first walk over
// face neighbours and keeps, per class kept, the largest (the first
// labelled on ties).
func referenceLargest(classes []uint8, dims [3]int, keep []bool, bg uint8) {
	X, Y, Z := dims[0], dims[1], dims[2]
	label := make([]int, len(classes))
	var sizes []int
	for i := range classes {
		if label[i] != 0 {
			continue
		}
		sizes = append(sizes, 0)
		id := len(sizes)
		stack := []int{i}
		label[i] = id
		for len(stack) > 0 {
			j := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			sizes[id-1]++
			x, y, z := j%X, j/X%Y, j/(X*Y)
			for _, d := range [][3]int{{-1, 0, 0}, {1, 0, 0}, {0, -1, 0}, {0, 1, 0}, {0, 0, -1}, {0, 0, 1}} {
				nx, ny, nz := x+d[0], y+d[1], z+d[2]
				if nx < 0 || ny < 0 || nz < 0 || nx >= X || ny >= Y || nz >= Z {
					continue
				}
				if k := nx + X*(ny+Y*nz); label[k] == 0 && classes[k] == classes[i] {
					label[k] = id
					stack = append(stack, k)
				}
			}
		}
	}
	best := map[uint8]int{}
	for i, c := range classes {
		if b, ok := best[c]; !ok || sizes[label[i]-1] > sizes[b-1] {
			best[c] = label[i]
		}
	}
	for i, c := range classes {
		if int(c) < len(keep) && keep[c] && c != bg && label[i] != best[c] {
			classes[i] = bg
		}
	}
}

// show draws classes slice by slice.
func show(classes []uint8, dims [3]int) string {
	var b strings.Builder
	for i, c := range classes {
		b.WriteByte('0' + c)
		if (i+1)%dims[0] == 0 {
			b.WriteByte('\n')
		}
		if (i+1)%(dims[0]*dims[1]) == 0 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestChooseLargestComponent: a class whose prediction has a stray speck
// keeps its largest component (its mean Dice rises from 8/9 to 1); a
// class whose reference has two components does not (1 falls to 0.8); a
// class in no case has no Dice and is not kept; a case without a class
// does not count in its mean.
func TestChooseLargestComponent(t *testing.T) {
	ref, dims := grid([]string{
		"11000220",
		"11000220",
		"00000000",
		"22000000",
	})
	pred, _ := grid([]string{
		"11000220",
		"11000220",
		"00001000",
		"22000000",
	})
	none, _ := grid([]string{ // neither holds class 1: not counted in its mean
		"00000000",
		"00000000",
		"00000022",
		"00000022",
	})
	choices, err := ChooseLargestComponent([]LabeledCase{{Pred: pred, Ref: ref, Dims: dims}, {Pred: none, Ref: none, Dims: dims}}, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	val := func(d *float64) float64 {
		if d == nil {
			return -1
		}
		return *d
	}
	want := []struct {
		class        int
		before, with float64
		keep         bool
	}{
		{1, 8.0 / 9, 1, true},
		{2, 1, (0.8 + 1) / 2, false},
		{3, -1, -1, false},
	}
	if len(choices) != len(want) {
		t.Fatalf("choices %+v", choices)
	}
	for i, w := range want {
		c := choices[i]
		if c.Class != w.class || c.Keep != w.keep || !near(val(c.Dice), w.before) || !near(val(c.DiceLargest), w.with) {
			t.Errorf("class %d: Dice %v, with its largest component %v, keep %v; want %v, %v, %v", c.Class, val(c.Dice), val(c.DiceLargest), c.Keep, w.before, w.with, w.keep)
		}
	}
	// The reference's 255 is not counted: a speck there costs nothing.
	ignored := slices.Clone(ref)
	ignored[2*8+4] = 255
	choices, _ = ChooseLargestComponent([]LabeledCase{{Pred: pred, Ref: ignored, Dims: dims}}, 3, 0)
	if choices[0].Keep || val(choices[0].Dice) != 1 {
		t.Errorf("a speck on ignored pixels: %+v", choices[0])
	}
	if _, err := ChooseLargestComponent(nil, 3, -1); err == nil {
		t.Error("no background was taken")
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// TestKeepClasses: --keep-largest's words, against the model's classes
// and background.
func TestKeepClasses(t *testing.T) {
	for _, tc := range []struct {
		spec string
		bg   int
		want []bool
		err  string
	}{
		{"", 0, nil, ""},
		{"all", 0, []bool{false, true, true, true}, ""},
		{"all", 2, []bool{true, true, false, true}, ""},
		{"1, 3", 0, []bool{false, true, false, true}, ""},
		{"0", 0, nil, "is the background"},
		{"4", 0, nil, "0..3"},
		{"1,x", 0, nil, "separated by commas"},
		{"1", -1, nil, "data.background is none"},
	} {
		got, err := keepClasses(tc.spec, 4, data.Background(tc.bg))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error saying %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.spec, got, err, tc.want)
		}
	}
	for spec, ok := range map[string]bool{"": true, "all": true, "1,2": true, "one": false, "-1": false} {
		if err := (Options{Overlap: -1, KeepLargest: spec}).CheckFlags(); (err == nil) != ok {
			t.Errorf("CheckFlags --keep-largest %q: %v", spec, err)
		}
	}
}

// TestKeepLargestOutputs: --keep-largest's masks are the masks without
// it with KeepLargest applied (a volume taken whole, 6-connected), for an
// image file whole and by tiles, a volume by a 2D model slice by slice,
// and a volume by a 3D UNet (streamed); predict.json counts what changed.
func TestKeepLargestOutputs(t *testing.T) {
	dir := t.TempDir()
	img, vol := filepath.Join(dir, "a.png"), filepath.Join(dir, "v.nii.gz")
	writeNoisePNG(t, img, 40, 56)
	writeVolume(t, vol, 26, 22, 9)
	slices2D := tinyConfig(1)
	slices2D.Model.InChannels = 1
	changed := int64(0)
	for _, tc := range []struct {
		name  string
		cfg   config.Config
		input string
		tile  string
	}{
		{"whole", tinyConfig(1), img, TileNone},
		{"tiles", tinyConfig(1), img, "16"},
		{"slices", slices2D, vol, ""},
		{"3d", tiny3DConfig(3), vol, ""},
	} {
		p, _ := ensembleOf(t, tc.cfg)
		plain, kept := t.TempDir(), t.TempDir()
		if _, err := p.Run(tc.input, plain, Options{Tile: tc.tile, Overlap: 0.5}, Limits{}, nil); err != nil {
			t.Fatal(err)
		}
		rep, err := p.Run(tc.input, kept, Options{Tile: tc.tile, Overlap: 0.5, KeepLargest: KeepAll}, Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var before, after []uint8
		var dims [3]int
		if tc.input == img {
			before, after = readClasses(t, filepath.Join(plain, "a.png")), readClasses(t, filepath.Join(kept, "a.png"))
			dims = [3]int{56, 40, 1}
		} else {
			before, after = volumeClasses(t, filepath.Join(plain, "v.nii.gz")), volumeClasses(t, filepath.Join(kept, "v.nii.gz"))
			dims = [3]int{26, 22, 9}
		}
		want := slices.Clone(before)
		n, err := KeepLargest(want, dims, []bool{false, true, true}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(after, want) || rep.Outputs[0].KeptLargest != n {
			t.Errorf("%s: the mask is not KeepLargest's of the mask without it (%d changed, predict.json says %d)", tc.name, n, rep.Outputs[0].KeptLargest)
		}
		t.Logf("%s: %d of %d changed", tc.name, n, len(want))
		changed += n
	}
	if changed == 0 {
		t.Error("no mask had a component to remove: no test")
	}
}

// volumeClasses is a mask volume's labels, voxel by voxel.
func volumeClasses(t *testing.T, path string) []uint8 {
	t.Helper()
	v, err := data.ReadVolume(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint8, v.Len())
	for i := range out {
		out[i] = uint8(v.At(i))
	}
	return out
}
