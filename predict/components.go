package predict

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/memunet/memunet/data"
)

// Largest connected component (Options.KeepLargest, --keep-largest):
// nnU-Net's post-processing. Of each class asked for, only the largest
// connected component of its pixels (voxels) is kept, and the others
// become the background class (data.background): 4-connected in a
// picture, 6-connected in a volume (faces, not edges or corners). A
// volume (a NIfTI file, by a 2D model slice by slice or by a 3D UNet) is
// taken whole, as one 3D mask. nnU-Net keeps it for a class only where
// it raises the class's validation Dice; ChooseLargestComponent makes
// that choice from a split's predictions and references.
//
// Memory: beside the classes (a volume's, whole: a 3D UNet that streams
// its slices holds them all where --keep-largest asks for this), a bit a
// voxel of marks and the queue of a flood fill, at most 4 bytes a voxel
// (largestBytes).

// KeepLargest keeps, of every class c with keep[c], only the largest
// connected component of its voxels in classes, a picture or a volume of
// dims [X, Y, Z] (x fastest, then y, then z; Z 1 for a picture): 4- or
// 6-connected. The voxels of its other components become class
// background; keep[background] is passed over. Of components of one size
// the first in voxel order is kept. It returns the voxels it changed.
func KeepLargest(classes []uint8, dims [3]int, keep []bool, background uint8) (int64, error) {
	n := int64(dims[0]) * int64(dims[1]) * int64(dims[2])
	switch {
	case dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || n != int64(len(classes)):
		return 0, fmt.Errorf("keep largest: %d classes for dims %v", len(classes), dims)
	case n > math.MaxInt32:
		return 0, fmt.Errorf("keep largest: %d voxels, more than the %d it labels", n, math.MaxInt32)
	}
	kept := func(c uint8) bool { return int(c) < len(keep) && keep[c] && c != background }
	f := flood{classes: classes, dims: dims, seen: make([]uint64, (n+63)/64)}
	seeds, sizes := make([]int, len(keep)), make([]int, len(keep))
	for c := range seeds {
		seeds[c] = -1
	}
	for i, c := range classes { // every component: its size
		if kept(c) && !f.marked(i) {
			if s := f.fill(i, c); s > sizes[c] {
				seeds[c], sizes[c] = i, s
			}
		}
	}
	clear(f.seen)
	for c, at := range seeds { // the largest of each class, marked again
		if at >= 0 {
			f.fill(at, uint8(c))
		}
	}
	var changed int64
	for i, c := range classes {
		if kept(c) && !f.marked(i) {
			classes[i] = background
			changed++
		}
	}
	return changed, nil
}

// largestBytes is what KeepLargest holds beside n classes: the marks,
// and the flood's queue at its most (a voxel each, 4 bytes).
func largestBytes(n int64) int64 { return (n+63)/64*8 + 4*n + 1<<10 }

// flood fills the connected components of classes, marking what it
// reaches in seen.
type flood struct {
	classes []uint8
	dims    [3]int
	seen    []uint64
	queue   []int32 // a ring: head, count
}

func (f *flood) marked(i int) bool { return f.seen[i>>6]&(1<<(i&63)) != 0 }
func (f *flood) mark(i int)        { f.seen[i>>6] |= 1 << (i & 63) }

// fill marks the component of class c that holds voxel at, unmarked,
// and returns its size.
func (f *flood) fill(at int, c uint8) int {
	X, Y, Z := f.dims[0], f.dims[1], f.dims[2]
	XY := X * Y
	head, count, size := 0, 0, 0
	push := func(i int) {
		if f.classes[i] != c || f.marked(i) {
			return
		}
		f.mark(i)
		if count == len(f.queue) { // grow the ring, up to a voxel each
			grown := make([]int32, min(max(2*len(f.queue), 1024), len(f.classes)))
			n := copy(grown, f.queue[head:])
			copy(grown[n:], f.queue[:head])
			f.queue, head = grown, 0
		}
		f.queue[(head+count)%len(f.queue)] = int32(i)
		count++
	}
	push(at)
	for count > 0 {
		i := int(f.queue[head])
		head, count = (head+1)%len(f.queue), count-1
		size++
		x, y, z := i%X, i/X%Y, i/XY
		if x > 0 {
			push(i - 1)
		}
		if x < X-1 {
			push(i + 1)
		}
		if y > 0 {
			push(i - X)
		}
		if y < Y-1 {
			push(i + X)
		}
		if z > 0 {
			push(i - XY)
		}
		if z < Z-1 {
			push(i + XY)
		}
	}
	return size
}

// KeepAll is Options.KeepLargest's word for every class but the
// background.
const KeepAll = "all"

// keepClasses parses Options.KeepLargest for a model of classes classes
// whose background is background: "" (none: nil), all (every class but
// the background), or classes such as "1,2".
func keepClasses(spec string, classes int, background data.Background) ([]bool, error) {
	if spec == "" {
		return nil, nil
	}
	if background == data.NoBackground {
		return nil, fmt.Errorf("--keep-largest turns what it removes into the background class, and this checkpoint's data.background is none")
	}
	keep := make([]bool, classes)
	if spec == KeepAll {
		for c := range keep {
			keep[c] = c != int(background)
		}
		return keep, nil
	}
	list, err := keepList(spec)
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		switch {
		case c >= classes:
			return nil, fmt.Errorf("--keep-largest %q: class %d: the model's classes are 0..%d", spec, c, classes-1)
		case c == int(background):
			return nil, fmt.Errorf("--keep-largest %q: class %d is the background (data.background), where what is removed goes", spec, c)
		}
		keep[c] = true
	}
	return keep, nil
}

// keepList is the classes of Options.KeepLargest (not all).
func keepList(spec string) ([]int, error) {
	var list []int
	for _, part := range strings.Split(spec, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || c < 0 || c > 255 {
			return nil, fmt.Errorf("--keep-largest %q: want all, or classes separated by commas, e.g. 1,2", spec)
		}
		list = append(list, c)
	}
	return list, nil
}

// keepLargest applies o's --keep-largest (parsed by Run) to classes of
// dims, and returns the voxels it changed.
func (o Options) keepLargest(classes []uint8, dims [3]int, background data.Background) (int64, error) {
	if o.keep == nil {
		return 0, nil
	}
	return KeepLargest(classes, dims, o.keep, uint8(background))
}

// LabeledCase is one case of a split: its predicted classes and its
// reference classes (data.Ignore: not counted), a picture or a volume of
// Dims (KeepLargest's).
type LabeledCase struct {
	Pred, Ref []uint8
	Dims      [3]int
}

// LargestChoice is the choice of keeping a class's largest component
// only, on a split: the class's mean Dice over the cases as predicted
// and with its largest component only (over the cases where it is
// defined: the class in the reference or the prediction; null in none),
// and whether to keep it (it raises the mean).
type LargestChoice struct {
	Class       int      `json:"class"`
	Dice        *float64 `json:"dice"`
	DiceLargest *float64 `json:"dice_largest"`
	Keep        bool     `json:"keep"`
}

// ChooseLargestComponent is nnU-Net's choice of post-processing, class by
// class: for every class but background, its mean Dice over cases as
// predicted, and with only its largest component kept (KeepLargest, the
// rest background); it keeps the largest component of a class only where
// that raises the class's mean Dice. Each class's choice changes only its
// own voxels and the background's, so the classes are chosen
// independently. The classes kept are KeepLargest's keep (and, listed,
// --keep-largest's).
func ChooseLargestComponent(cases []LabeledCase, classes, background int) ([]LargestChoice, error) {
	if background < 0 || background >= classes {
		return nil, fmt.Errorf("choose largest component: background %d is not a class of %d", background, classes)
	}
	var choices []LargestChoice
	var buf []uint8
	for c := range classes {
		if c == background {
			continue
		}
		keep := make([]bool, classes)
		keep[c] = true
		var before, after []float64
		for i, cs := range cases {
			if len(cs.Ref) != len(cs.Pred) {
				return nil, fmt.Errorf("choose largest component: case %d: %d predicted voxels, %d in its reference", i, len(cs.Pred), len(cs.Ref))
			}
			buf = append(buf[:0], cs.Pred...)
			if _, err := KeepLargest(buf, cs.Dims, keep, uint8(background)); err != nil {
				return nil, fmt.Errorf("choose largest component: case %d: %w", i, err)
			}
			if d, ok := classDice(cs.Pred, cs.Ref, uint8(c)); ok {
				before = append(before, d)
			}
			if d, ok := classDice(buf, cs.Ref, uint8(c)); ok {
				after = append(after, d)
			}
		}
		ch := LargestChoice{Class: c, Dice: mean(before), DiceLargest: mean(after)}
		ch.Keep = ch.Dice != nil && ch.DiceLargest != nil && *ch.DiceLargest > *ch.Dice
		choices = append(choices, ch)
	}
	return choices, nil
}

// classDice is class c's Dice, 2TP/(2TP+FP+FN), of pred against ref (its
// data.Ignore voxels not counted); false where neither holds c.
func classDice(pred, ref []uint8, c uint8) (float64, bool) {
	var tp, fp, fn int64
	for i, r := range ref {
		if r == data.Ignore {
			continue
		}
		switch p := pred[i]; {
		case p == c && r == c:
			tp++
		case p == c:
			fp++
		case r == c:
			fn++
		}
	}
	if tp+fp+fn == 0 {
		return 0, false
	}
	return float64(2*tp) / float64(2*tp+fp+fn), true
}
