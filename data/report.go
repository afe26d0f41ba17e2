package data

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// SizeCount is one distinct image size and how many images have it.
type SizeCount struct {
	H, W  int
	Count int
	First string // the first image of this size
}

// Report is what opening a dataset found: counts, sizes, mask values, the
// value -> class mapping and every problem, each naming its file.
type Report struct {
	Source, Path string
	MaskSuffix   string
	Samples      int
	Train, Val   int
	// ValFromLists says the split is VOC's train.txt / val.txt.
	ValFromLists bool
	// SplitFolders says the split is a folder set's train/, val/ and test/
	// subfolders; Test counts the test samples (never trained or
	// validated on; memunet eval and predict dataset:test use them).
	SplitFolders bool
	Test         int
	Channels     int
	Classes      int
	// Sizes are the distinct source image sizes, most frequent first.
	Sizes []SizeCount
	// Height and Width are the size samples have after resizing (0 when
	// unknown because of a problem); Resized says how they got it, Patched
	// that they are patches (data.patch).
	Height, Width int
	// Depth is a volume's slices (model.dims 3), stacked in Height; 0 for
	// images.
	Depth int
	// Folds and Fold are data.folds and data.fold where the samples that
	// split at random were folded (Folds 0: they were not).
	Folds, Fold int
	// SliceSplit says data.split: slices divided the nifti slices.
	SliceSplit bool
	// Background is data.background, marked in the class totals.
	Background Background
	// MaxDepth is the most slices a nifti volume has.
	MaxDepth int
	Resized  string
	Patched  string
	// Values are the raw mask values found, ascending, each with its
	// pixels and the masks holding it; Value looks one up.
	Values []MaskValue
	// MaskFormats are how the masks store their values (bit depth, kind
	// and file type), most frequent first.
	MaskFormats []MaskFormat
	// ImageFormats are how the images store theirs, most frequent first.
	ImageFormats []ImageFormat
	// Slicing says how nifti volumes became slices: counts, the axis, the
	// intensity window.
	Slicing string
	// Spacing words the nifti volumes' voxel sizes (pixdim, units).
	Spacing string
	// Mapping is the class of each raw value 0..MaxMaskValue, indexed by
	// the value (-1: not a class; Ignore: ignored); Discovered says it came
	// from a scan; MappingDesc says how.
	Mapping     []int16
	Discovered  bool
	MappingDesc string
	Problems    []Problem
}

// MaxMaskValue is the largest raw mask value: masks are read by value,
// 0..255 from 8-bit masks and 0..65535 from 16-bit gray ones.
const MaxMaskValue = 1<<16 - 1

// MaskValue is one raw mask value found: its pixels in all masks, how many
// masks hold it and the first of them.
type MaskValue struct {
	Value     int
	Pixels    int64
	Masks     int
	FirstMask string
}

// MaskFormat is one way of storing mask values and the masks that use it.
type MaskFormat struct {
	// Format is the bit depth, kind and file type, e.g. "16-bit gray PNG",
	// "8-bit palette PNG" or "palette GIF".
	Format string
	// Bits is 16 for masks whose values are 16-bit (0..65535), else 8.
	Bits  int
	Masks int
	First string // the first mask stored so
}

// ImageFormat is one way of storing images and the images that use it.
type ImageFormat struct {
	// Format is the bit depth, kind and file type, e.g. "8-bit RGB PNG" or
	// "16-bit gray TIFF (tiled 256x256, LZW)".
	Format string
	// Bits is 16 for images read at 16 bits per channel (raw intensity
	// p/65535), else 8 (p/255).
	Bits   int
	Images int
	First  string // the first image stored so
}

// Value returns what the report found of raw mask value v (zero counts
// when no mask holds it).
func (r *Report) Value(v int) MaskValue {
	k, ok := slices.BinarySearchFunc(r.Values, v, func(m MaskValue, v int) int { return cmp.Compare(m.Value, v) })
	if !ok {
		return MaskValue{Value: v}
	}
	return r.Values[k]
}

// Fatal returns the problems that stop training.
func (r *Report) Fatal() []Problem {
	var out []Problem
	for _, p := range r.Problems {
		if p.Fatal {
			out = append(out, p)
		}
	}
	return out
}

// Err is nil, or the first fatal problem with a count of the others (a
// *ProblemsError).
func (r *Report) Err() error {
	f := r.Fatal()
	if len(f) == 0 {
		return nil
	}
	return &ProblemsError{First: f[0], More: len(f) - 1}
}

// ProblemsError is a dataset that cannot be trained on: its first fatal
// problem, and how many more there are.
type ProblemsError struct {
	First Problem
	More  int
	// Check is the command that lists them all, with the user's --config
	// and --set (config.Invocation); "" says "memunet data check".
	Check string
}

func (e *ProblemsError) Error() string {
	if e.More == 0 {
		return "data: " + e.First.Error()
	}
	check := e.Check
	if check == "" {
		check = "memunet data check"
	}
	return fmt.Sprintf("data: %v (and %s; %s lists them all)", e.First, plural(e.More, "more problem", "more problems"), check)
}

func (e *ProblemsError) Unwrap() error { return e.First }

// mixedDepths is a warning when some masks are 8-bit and others 16-bit:
// their values are read as they are (a 16-bit 257 is not an 8-bit 1), so
// masks exported by different tools may disagree.
func mixedDepths(formats []MaskFormat) (Problem, bool) {
	var by [2][]MaskFormat // 8-bit, 16-bit
	for _, f := range formats {
		k := 0
		if f.Bits > 8 {
			k = 1
		}
		by[k] = append(by[k], f)
	}
	if len(by[0]) == 0 || len(by[1]) == 0 {
		return Problem{}, false
	}
	count := func(fs []MaskFormat) (n int) {
		for _, f := range fs {
			n += f.Masks
		}
		return n
	}
	few, many := by[1], by[0] // name the first mask of the rarer depth
	if count(by[0]) < count(by[1]) {
		few, many = by[0], by[1]
	}
	return warning(few[0].First, "is stored as %s but %s stored as %s (first %s): the masks mix 8-bit and 16-bit values, each read by value (16-bit ones 0..65535, not scaled to 8 bits); check that they hold the same class values",
		few[0].Format, plural(count(many), "other mask is", "other masks are"), many[0].Format, many[0].First), true
}

// plural is "1 mask" or "2 masks".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// shortList prints a list of values as %v does, the middle left out of a
// long one.
func shortList(vs []int) string {
	if len(vs) <= 20 {
		return fmt.Sprint(vs)
	}
	return fmt.Sprintf("%v ... %v (%d values)", vs[:10], vs[len(vs)-5:], len(vs))
}

// MaxClasses is the most classes a model has (model.classes): a class
// is a byte, and 255 is Ignore.
const MaxClasses = 255

// maxListedValues bounds the mask values Write lists one by one.
const maxListedValues = 256

// Write prints the report for people: counts, sizes, the mask-value
// histogram with the class of each value, and every problem.
func (r *Report) Write(w io.Writer) {
	where := r.Source
	if r.Source != SourceSynthetic {
		where += " " + r.Path
		if r.MaskSuffix != "" {
			where += fmt.Sprintf(" (mask suffix %q)", r.MaskSuffix)
		}
	}
	fmt.Fprintf(w, "data: %s\n", where)
	random := "data.val_fraction"
	if r.Folds > 0 {
		random = fmt.Sprintf("fold %d of %d (data.fold, data.folds)", r.Fold, r.Folds)
	}
	split := random
	switch {
	case r.ValFromLists:
		split = "train.txt / val.txt"
	case r.SplitFolders && r.Val > 0 && r.Train+r.Val+r.Test == r.Samples && r.Folds == 0:
		split = "the train/ val/ test/ folders"
	case r.SplitFolders:
		split = "the train/ and test/ folders, val by " + random + " of train/"
	case r.SliceSplit:
		split = "slices (data.split): a block of data.val_fraction of each volume's slices, the slice each side of it left out"
	case r.Source == SourceNIfTI:
		split = "volume, " + random + " of the volumes"
	}
	test := ""
	if r.SplitFolders {
		test = fmt.Sprintf(", test %d", r.Test)
	}
	if r.Train+r.Val > 0 {
		fmt.Fprintf(w, "samples: %d (train %d, val %d%s, split by %s); %d channel(s), %d classes\n", r.Samples, r.Train, r.Val, test, split, r.Channels, r.Classes)
	} else {
		fmt.Fprintf(w, "samples: %d listed (not split: see the problems); %d channel(s), %d classes\n", r.Samples, r.Channels, r.Classes)
	}
	if len(r.Sizes) > 0 {
		var parts []string
		for k, s := range r.Sizes {
			if k == 5 {
				parts = append(parts, fmt.Sprintf("and %d more sizes", len(r.Sizes)-k))
				break
			}
			parts = append(parts, fmt.Sprintf("%dx%d: %d", s.H, s.W, s.Count))
		}
		fmt.Fprintf(w, "image sizes (height x width: images): %s\n", strings.Join(parts, ", "))
	}
	if r.Height > 0 {
		how := "as they are"
		if r.Resized != "" {
			how = "by " + r.Resized
		}
		if r.Patched != "" {
			how = r.Patched
		}
		if r.Depth > 0 {
			fmt.Fprintf(w, "training size: %dx%dx%d volumes (%s)\n", r.Depth, r.Height/r.Depth, r.Width, how)
		} else {
			fmt.Fprintf(w, "training size: %dx%d (%s)\n", r.Height, r.Width, how)
		}
	}
	if r.Slicing != "" {
		fmt.Fprintf(w, "volumes: %s\n", r.Slicing)
	}
	if r.Spacing != "" {
		fmt.Fprintf(w, "voxel spacing: %s\n", r.Spacing)
	}
	if len(r.ImageFormats) > 0 {
		var parts []string
		for _, f := range r.ImageFormats {
			part := fmt.Sprintf("%s (%s", f.Format, plural(f.Images, "image", "images"))
			if len(r.ImageFormats) > 1 {
				part += ", first " + f.First
			}
			if f.Bits > 8 && r.Source != SourceNIfTI {
				part += "; values read whole, v = p/65535 before data.mean/std"
			}
			parts = append(parts, part+")")
		}
		fmt.Fprintf(w, "images: %s\n", strings.Join(parts, ", "))
	}
	if len(r.MaskFormats) > 0 {
		var parts []string
		for _, f := range r.MaskFormats {
			part := fmt.Sprintf("%s (%s", f.Format, plural(f.Masks, "mask", "masks"))
			if len(r.MaskFormats) > 1 {
				part += ", first " + f.First
			}
			if f.Bits > 8 {
				part += "; values read whole, 0..65535"
			}
			parts = append(parts, part+")")
		}
		fmt.Fprintf(w, "masks: %s\n", strings.Join(parts, ", "))
	}
	var total int64
	for _, mv := range r.Values {
		total += mv.Pixels
	}
	if total > 0 {
		fmt.Fprintf(w, "mask values (value -> class: pixels, share, masks holding it):\n")
		width := max(3, len(fmt.Sprint(r.Values[len(r.Values)-1].Value)))
		for k, mv := range r.Values {
			if k == maxListedValues && len(r.Values) > maxListedValues+1 {
				var rest int64
				for _, mv := range r.Values[k:] {
					rest += mv.Pixels
				}
				fmt.Fprintf(w, "  and %d more values (%d px, %.2f%%): memunet reads 16-bit masks by value; are these masks images?\n",
					len(r.Values)-k, rest, 100*float64(rest)/float64(total))
				break
			}
			cls := "not a class"
			switch c := r.Mapping[mv.Value]; {
			case c == int16(Ignore):
				cls = "ignored"
			case c >= 0:
				cls = fmt.Sprintf("class %d", c)
			}
			fmt.Fprintf(w, "  %*d -> %-11s %12d px  %6.2f%%  %d masks\n", width, mv.Value, cls+":", mv.Pixels, 100*float64(mv.Pixels)/float64(total), mv.Masks)
		}
	}
	if r.MappingDesc != "" {
		fmt.Fprintf(w, "mapping: %s\n", r.MappingDesc)
	}
	if line := r.classTotals(total); line != "" {
		fmt.Fprintf(w, "classes (pixels or voxels, share): %s\n", line)
	}
	if r.Discovered {
		if vals := r.discoveredValues(); len(vals) > 0 && len(r.Values) <= r.Classes {
			fmt.Fprintf(w, "to fix this mapping, set data.mask_values: %s\n", formatInts(vals))
		}
	}
	fatal := r.Fatal()
	switch {
	case len(r.Problems) == 0:
		fmt.Fprintf(w, "problems: none\n")
	default:
		fmt.Fprintf(w, "problems: %d (%d errors, %d warnings)\n", len(r.Problems), len(fatal), len(r.Problems)-len(fatal))
		for _, p := range r.Problems {
			kind := "warning"
			if p.Fatal {
				kind = "error"
			}
			fmt.Fprintf(w, "  %s: %s\n", kind, p.Error())
		}
	}
}

func (r *Report) discoveredValues() []int {
	var vals []int
	for v, c := range r.Mapping {
		if c >= 0 && c != int16(Ignore) {
			vals = append(vals, v)
		}
	}
	slices.SortFunc(vals, func(a, b int) int { return cmp.Compare(r.Mapping[a], r.Mapping[b]) })
	return vals
}

func formatInts(vs []int) string {
	parts := make([]string, len(vs))
	for k, v := range vs {
		parts[k] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Summary is one line about an opened set, for logs; it includes the
// discovered mapping when there is one, with the data.mask_values that
// fixes it, and check, the command that lists the warnings ("" says
// "memunet data check").
func (r *Report) Summary(check string) string { return r.summary(check, true) }

// classTotals words each class's pixels (several values may merge into
// one) and the ignored ones, with the background marked: "" when nothing
// was counted.
func (r *Report) classTotals(total int64) string {
	if total == 0 {
		return ""
	}
	per := make([]int64, r.Classes)
	var ignored int64
	for _, mv := range r.Values {
		switch c := r.Mapping[mv.Value]; {
		case c == int16(Ignore):
			ignored += mv.Pixels
		case c >= 0 && int(c) < len(per):
			per[c] += mv.Pixels
		}
	}
	var parts []string
	for k, n := range per {
		name := fmt.Sprint(k)
		if k == int(r.Background) {
			name += " (background)"
		}
		parts = append(parts, fmt.Sprintf("%s %d (%.2f%%)", name, n, 100*float64(n)/float64(total)))
	}
	if ignored > 0 {
		parts = append(parts, fmt.Sprintf("ignored %d (%.2f%%)", ignored, 100*float64(ignored)/float64(total)))
	}
	return strings.Join(parts, ", ")
}

// Recap is Summary without the data.mask_values hint: the line a
// checkpoint's commands (predict, eval) print of its set, whose mapping
// training said once and the checkpoint keeps, so that the hint is not
// repeated on every command.
func (r *Report) Recap(check string) string { return r.summary(check, false) }

func (r *Report) summary(check string, hint bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "data: %s %s: %d samples (train %d, val %d)", r.Source, filepath.Clean(r.Path), r.Samples, r.Train, r.Val)
	if r.Depth > 0 {
		fmt.Fprintf(&b, ", %dx%dx%d volumes", r.Depth, r.Height/r.Depth, r.Width)
	} else if len(r.Sizes) == 1 {
		fmt.Fprintf(&b, ", %dx%d", r.Sizes[0].H, r.Sizes[0].W)
	} else if len(r.Sizes) > 1 {
		fmt.Fprintf(&b, ", %d image sizes", len(r.Sizes))
	}
	if r.Resized != "" {
		fmt.Fprintf(&b, " -> %dx%d by %s", r.Height, r.Width, r.Resized)
	}
	if len(r.MaskFormats) > 0 {
		var fs []string
		for _, f := range r.MaskFormats {
			fs = append(fs, f.Format)
		}
		fmt.Fprintf(&b, "; masks: %s", strings.Join(fs, ", "))
	}
	if r.Discovered {
		vals := r.discoveredValues()
		parts := make([]string, len(vals))
		for k, v := range vals {
			parts[k] = fmt.Sprintf("%d->%d", v, k)
		}
		fmt.Fprintf(&b, "; mask values found by a scan: %s", strings.Join(parts, " "))
		if hint {
			fmt.Fprintf(&b, " (set data.mask_values: %s to fix them)", formatInts(vals))
		}
	}
	if n := len(r.Problems); n > 0 {
		if check == "" {
			check = "memunet data check"
		}
		fmt.Fprintf(&b, "; %s (%s lists them)", plural(n, "warning", "warnings"), check)
	}
	return b.String()
}

// ClassValues is the raw mask value of each class 0..classes-1 (the
// smallest that maps to it), so predictions can be written in the
// dataset's own values; nil when every class is its own value (synthetic,
// VOC, masks holding class indices).
func (r *Report) ClassValues(classes int) []int {
	vals := make([]int, classes)
	for k := range vals {
		vals[k] = -1
	}
	for v, c := range r.Mapping {
		if c >= 0 && int(c) < classes && vals[c] < 0 {
			vals[c] = v
		}
	}
	identity := true
	for k, v := range vals {
		if v < 0 {
			vals[k] = k // a class no mask holds: its index
		}
		identity = identity && vals[k] == k
	}
	if identity {
		return nil
	}
	return vals
}
