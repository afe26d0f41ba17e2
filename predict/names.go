package predict

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/runfiles"
)

// OutputDir is where a prediction of input (a file, a folder or
// dataset:SPLIT) by the checkpoint at step of run goes by default:
// run/predict/NAME-step-N, NAME the split or the input's base name without
// its extension.
func OutputDir(run, input string, step int) string {
	name := strings.TrimPrefix(input, "dataset:")
	if name == input {
		name = strings.TrimSuffix(filepath.Base(filepath.Clean(input)), filepath.Ext(input))
	}
	return filepath.Join(run, runfiles.Predict, runfiles.AtStep(name, step))
}

// namer gives each input the stem of its output files so that no two
// inputs write one file (a.png and a.jpg both give a.png; a.png's overlay
// is a_overlay.png's mask) and none writes predict.json or legend.png.
// Names are compared lower-cased: a case-insensitive file system folds
// A.png onto a.png.
type namer struct {
	taken   map[string]string // a file name, lower-cased -> the input writing it
	opts    Options
	classes int
	// notes say which inputs were renamed, until flush prints them (after
	// the output folder is known to be usable).
	notes []string
}

func newNamer(opts Options, classes int) *namer {
	n := &namer{taken: map[string]string{}, opts: opts, classes: classes}
	for _, f := range []string{runfiles.PredictReport, runfiles.Legend, outdir.LockName, outdir.JournalName} {
		n.taken[strings.ToLower(f)] = "predict itself"
	}
	return n
}

// files are the names an input of stem writes.
func (n *namer) files(stem string) []string {
	return outputOf("", stem, n.opts, n.classes).files()
}

// outputOf is the Output of input, its files named after stem: the mask,
// the overlay and the probabilities opts asks for (k classes).
func outputOf(input, stem string, opts Options, k int) Output {
	out := Output{Input: input, Mask: stem + ".png"}
	if opts.Overlay {
		out.Overlay = stem + "_overlay.png"
	}
	switch opts.Probs {
	case "png":
		for c := range k {
			out.Probs = append(out.Probs, probName(stem, c))
		}
	case "npy":
		out.Probs = []string{stem + "_probs.npy"}
	}
	return out
}

// files are the files o names.
func (o Output) files() []string {
	var names []string
	for _, name := range append([]string{o.Mask, o.Overlay}, o.Probs...) {
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// holder is the input already writing one of stem's files, and that file.
func (n *namer) holder(stem string) (input, file string) {
	for _, f := range n.files(stem) {
		if in, ok := n.taken[strings.ToLower(f)]; ok {
			return in, f
		}
	}
	return "", ""
}

// name takes for input the first free stem of stem, stem-suffix,
// stem-suffix-2, ... and notes when it is not stem itself. A stem that
// cannot name a file safely (nameProblem: a dataset sample's file name
// with a line break, say) gives way to suffix, noted too.
func (n *namer) name(input, stem, suffix string) string {
	stem = safeStem(stem, suffix)
	if why := n.unfit(stem); why != "" {
		n.notes = append(n.notes, fmt.Sprintf("predict: %s: its name %q cannot name its outputs (%s): they are named %s instead", input, stem, why, suffix+".png"))
		stem = suffix
	}
	chosen, other, file := n.choose(stem, suffix)
	n.take(input, chosen, other, file)
	return chosen
}

// fileName names the outputs of the input file path as name does, or
// says why they cannot be named after it (and takes no name): its file
// name cannot be listed or reported faithfully, or an output's name would
// be too long to make. Such a file is skipped, not renamed: its outputs
// named otherwise could not be told for its.
func (n *namer) fileName(path, stem, suffix string) (string, string) {
	if why := nameProblem(filepath.Base(path)); why != "" {
		return "", why
	}
	chosen, other, file := n.choose(safeStem(stem, suffix), suffix)
	if why := n.unfit(chosen); why != "" {
		return "", why
	}
	n.take(path, chosen, other, file)
	return chosen, ""
}

// choose is the first free stem of stem, stem-suffix, stem-suffix-2, ...
// and, when it is not stem, the input holding one of stem's files and
// that file.
func (n *namer) choose(stem, suffix string) (chosen, other, file string) {
	chosen = stem
	other, file = n.holder(stem)
	for i := 1; other != ""; i++ {
		chosen = stem + "-" + suffix
		if i > 1 {
			chosen += fmt.Sprintf("-%d", i)
		}
		if o, _ := n.holder(chosen); o == "" {
			break
		}
	}
	return chosen, other, file
}

// take gives input the files of chosen, noting a rename away from other's.
func (n *namer) take(input, chosen, other, file string) {
	if other != "" {
		n.notes = append(n.notes, fmt.Sprintf("predict: %s would write %s, as %s does: its outputs are named %s instead", input, file, other, chosen+".png"))
	}
	for _, f := range n.files(chosen) {
		n.taken[strings.ToLower(f)] = input
	}
}

// unfit says why stem cannot name its outputs ("" when it can).
func (n *namer) unfit(stem string) string {
	if why := nameProblem(stem); why != "" {
		return why
	}
	for _, f := range n.files(stem) {
		if len(f) > maxNameBytes {
			return fmt.Sprintf("an output's name (the name and %s) would be %d bytes long, over the %d a file name may have", f[len(stem):], len(f), maxNameBytes)
		}
	}
	return ""
}

// maxNameBytes is the longest file name common file systems take
// (NAME_MAX on Linux, ext4, XFS, APFS).
const maxNameBytes = 255

// nameProblem says why name cannot name predict's outputs or be reported
// faithfully ("" when it can): a line break would split the journal's
// lines (each a file name) and the user's; other control characters
// garble a terminal; bytes that are not UTF-8 come back from predict.json
// as U+FFFD, so that --force would not know the file for its own.
func nameProblem(name string) string {
	switch {
	case strings.ContainsAny(name, "\n\r"):
		return "its name holds a line break"
	case !utf8.ValidString(name):
		return "its name is not valid UTF-8"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "its name holds a control character"
	case len(name) > maxNameBytes:
		return fmt.Sprintf("its name is longer than %d bytes", maxNameBytes)
	}
	return ""
}

// flush prints the notes not yet printed on w.
func (n *namer) flush(w io.Writer) {
	for _, s := range n.notes {
		fmt.Fprintln(w, s)
	}
	n.notes = nil
}

// safeStem is stem made a plain file name: no separators or NULs, not
// empty, "." or ".." (then fallback).
func safeStem(stem, fallback string) string {
	stem = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, stem)
	if stem == "" || stem == "." || stem == ".." {
		return fallback
	}
	return stem
}

// fileStem is a file's stem and its extension without the dot, lower-cased
// ("a", "jpg"), the suffix that tells it from a file of the same stem.
func fileStem(path string) (stem, suffix string) {
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	suffix = strings.ToLower(strings.TrimPrefix(ext, "."))
	if suffix == "" {
		suffix = "file"
	}
	return strings.TrimSuffix(base, ext), suffix
}
