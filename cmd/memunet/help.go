package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/report"
)

// commandHelp is one command's entry in the help: its synopsis, what it does
// and, for a group (data, config), its subcommands. The flags and their
// defaults are never written here: help lists them from the command's own
// FlagSet, and TestHelpListsEveryFlag checks that the synopsis names each.
type commandHelp struct {
	name    string   // as typed: "train", "data check"
	usage   string   // the synopsis, "memunet ..."; a group's is its subcommands'
	summary string   // what it does, one paragraph (wrapped when printed)
	subs    []string // a group's subcommands, e.g. "data check"
}

// commands lists every command in the order the help shows them.
var commands = []commandHelp{
	{name: "train", usage: synopsis(trainUsage), summary: `trains as the YAML config says ("memunet config print" prints the
		commented quickstart config) and writes config.yaml, metrics.jsonl and summary.json into --out
		(default: output.dir, else runs/<timestamp>). --set overrides one key, e.g. --set train.steps=50;
		repeatable. Checkpoints go to <out>/checkpoints (train.checkpoint_every, the end, SIGINT/SIGTERM,
		after which it exits 130 or 143; a second signal stops at once without saving);
		--resume auto continues the newest one there, --resume PATH a given one, exactly where it stopped.
		One process at a time trains into a directory (a second is refused, naming the first). A
		directory that already holds a run is refused unless --resume or --force is given; a resume
		whose configuration or dataset changed since the checkpoint is refused naming what changed
		(--allow-data-change continues on changed data).`},
	{name: "cv", usage: synopsis(cvUsage), summary: `k-fold cross-validation: trains fold 0..K-1 (data.folds K,
		data.fold k: each fold of the samples that split at random validates once) into DIR/fold_k, each a
		train run of its own, then writes DIR/cv.json and prints each fold's final val_loss, mIoU, Dice
		and per-class Dice with their mean and standard deviation. Run again with the same --out, it
		skips the finished folds and resumes an unfinished one from its newest checkpoint, bit for bit.`},
	{name: "predict", usage: synopsis(predictUsage), summary: `segments images with a checkpoint's model and
		preprocessing: palette mask PNGs (and overlays) into --out; dataset:val predicts the checkpoint's
		own validation split and reports its metrics, each output named after its source file;
		legend.png shows each class's color. A run directory as --checkpoint means its best
		checkpoint by val_miou (--newest: its newest). Each batch's memory is planned first: an
		image too large for --capacity or the machine is refused with a size that fits. --out must be
		outside the inputs and empty, or hold an earlier prediction that --force replaces; one
		predict at a time writes there. A 3D UNet (model.dims 3) predicts NIfTI volumes by windows
		of its training patch, streamed slab by slab along z; --references scores them (Dice).
		--checkpoint A,B,... averages their probabilities (an ensemble); --keep-largest keeps a class's
		largest component.`},
	{name: "eval", usage: synopsis(evalUsage), summary: `scores a checkpoint on a split of its dataset (val, test: a folder
		set's test/ subfolder, or train), or of another one by --set data.*: loss, pixel accuracy, mIoU,
		Dice and the per-class table, as training's validation computes them; writes a JSON report.
		A batch that cannot fit --capacity or the machine is refused first, naming what would. With
		--predictions DIR --references DIR it scores a folder of masks against another, matched by name
		(NIfTI or mask images; each label value a class): per case Dice, IoU and HD95, and the means.`},
	{name: "export", usage: synopsis(exportUsage), summary: `writes a checkpoint's weights as one safetensors file
		with PyTorch state_dict names (see docs/guide/export.md), or with --format onnx the
		eval-mode model as an ONNX graph for ONNX Runtime (dynamic batch, height and width;
		--with-normalize takes raw [0, 1] images, --with-softmax outputs probabilities).`},
	{name: "plan", usage: synopsis(planUsage), summary: `predicts the peak memory of each variant (baseline,
		checkpoint, fp16, bf16, accum4, all, and the config as given) without training; with --capacity
		(default memory.capacity) it says which fit and recommends the fastest that does, ending with
		the --set flags that apply it. The table fits 100 columns; --wide adds the peak by category and phase;
		--suggest patch prints the largest square data.patch whose plan fits the capacity.`},
	{name: "compare", usage: synopsis(compareUsage), summary: `runs each variant (and the same UNet in plain
		gorgonia) for a few steps in fresh processes and prints memory, speed and loss side by side;
		writes compare.csv, compare.json, memory.png, timeline.png.`},
	{name: "bench", usage: synopsis(benchUsage), summary: `times training steps: median step, GFLOP/s, time per
		layer kind.`},
	{name: "data", subs: []string{"data check", "data synth", "data preview"}, summary: `check reads the configured
		dataset in full and prints counts, sizes, the mask-value histogram, the value -> class mapping
		and every problem with its file; synth writes the built-in shapes in the folder layout
		(DIR/images, DIR/masks) that data.source: folder reads; preview draws training samples as
		the augmentation makes them.`},
	{name: "data check", usage: synopsis(dataCheckUsage), summary: `reads the configured dataset in full and
		prints counts, sizes, each mask format and bit depth, the mask-value histogram, the value ->
		class mapping and every problem with its file.`},
	{name: "data synth", usage: synopsis(dataSynthUsage), summary: `writes the built-in synthetic shapes as RGB PNG
		images and palette PNG masks in the folder layout (DIR/images, DIR/masks) that data.source:
		folder reads.`},
	{name: "data preview", usage: synopsis(dataPreviewUsage), summary: `draws training samples as training sees
		them in an epoch (data.flip and data.augment applied, the same draws as the run's), each image
		beside its mask, into a PNG.`},
	{name: "config", subs: []string{"config print", "config list"}, summary: `print writes a commented
		example config built into memunet to stdout, e.g. "memunet config print fp16 > my.yaml"; list
		names them.`},
	{name: "config print", usage: synopsis(configPrintUsage), summary: `prints the config NAME (default quickstart), comments included, exactly as configs/NAME.yaml in the repository; every key it
		does not set takes the default quickstart shows. See "memunet config list" for the names.`},
	{name: "config list", usage: synopsis(configListUsage), summary: `names the configs "memunet config print"
		prints, each with its first comment line.`},
	{name: "gorgonia", usage: synopsis(gorgoniaUsage), summary: `trains the configured UNet as plain gorgonia
		would (ExprGraph, TapeMachine, its Adam) and writes summary.json: compare's reference row.`},
	{name: "version", usage: "memunet version", summary: `prints memunet's version.`},
	{name: "help", usage: "memunet help [COMMAND]", summary: `prints this usage, or a command's usage,
		description and every flag with its default (the same as "memunet COMMAND --help").`},
}

// synopsis is a command's usage constant ("usage: memunet ...", as its
// usage errors print it) without "usage: ".
func synopsis(usage string) string { return strings.TrimPrefix(usage, "usage: ") }

// lookupCommand returns the entry called name ("data synth").
func lookupCommand(name string) (commandHelp, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return commandHelp{}, false
}

// commandNames lists the names "memunet help" accepts.
func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// helpRequest is what a command returns for -h, -help or --help: run prints
// the command's help (usage, description, every flag with its default) to
// stdout and exits 0.
type helpRequest struct {
	name  string        // the command, as in commands
	flags *flag.FlagSet // its flags; nil when it has none
}

func (h helpRequest) Error() string { return h.name + ": help requested" }

// isHelpArg reports whether a is one of the arguments that ask for help.
func isHelpArg(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// flagError turns the error of fs.Parse into what the command returns: a
// help request for -h/-help/--help, else a usage error naming the command.
func flagError(fs *flag.FlagSet, args []string, err error, usage string) error {
	if errors.Is(err, flag.ErrHelp) {
		return helpRequest{name: fs.Name(), flags: fs}
	}
	return usageError{fmt.Sprintf("%s: %s; %s", fs.Name(), config.FlagProblem(fs, args, err), usage)}
}

// helpCommand is "memunet help [COMMAND]": without one the overall usage,
// with one the same help as "memunet COMMAND --help".
func helpCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, topUsage())
		return nil
	}
	if isHelpArg(args[0]) {
		return helpRequest{name: "help"}
	}
	name := strings.Join(args, " ")
	if _, ok := lookupCommand(name); !ok {
		return usageError{fmt.Sprintf("help: unknown command %q; %sthe commands are %s", name, config.DidYouMean(name, strings.Split(commandNames(), ", ")), commandNames())}
	}
	if name == "help" {
		return helpRequest{name: "help"}
	}
	return helpOf(name)
}

// helpOf returns the help request of the command called name, asking the
// command itself (with --help, which it answers before doing anything) so
// that the flags listed are the ones it parses.
func helpOf(name string) error {
	err := dispatch(append(strings.Fields(name), "--help"), io.Discard, io.Discard, nil)
	var h helpRequest
	if !errors.As(err, &h) {
		return fmt.Errorf("%s --help did not answer with its help: %v", name, err)
	}
	return err
}

const helpWidth = 79

// topUsage is the overall usage: every command's synopsis, then what each
// top-level command does.
func topUsage() string {
	var b strings.Builder
	b.WriteString("memunet trains UNet segmentation models in less memory, and measures it.\n\nUsage:\n")
	for _, c := range commands {
		if c.usage != "" {
			b.WriteString(report.Wrap(usageWords(c.usage), helpWidth, "  ", "      "))
		}
	}
	b.WriteString("\n")
	for _, c := range commands {
		if !strings.Contains(c.name, " ") && c.name != "help" {
			b.WriteString(report.Wrap(strings.Fields(c.summary), helpWidth, fmt.Sprintf("%-9s", c.name), strings.Repeat(" ", 9)))
		}
	}
	b.WriteString("\n")
	b.WriteString(report.Wrap(strings.Fields(`"memunet help COMMAND" or "memunet COMMAND --help" prints a command's
		usage with every flag and its default; "memunet config print" a commented config to start from.`), helpWidth, "", ""))
	return b.String()
}

// writeHelp prints a command's help: its usage, what it does and each flag
// (from its FlagSet) with its placeholder, meaning and default. A group's
// help is its summary and each subcommand's help.
func writeHelp(w io.Writer, h helpRequest) {
	c, ok := lookupCommand(h.name)
	if !ok { // cannot happen: every command's FlagSet is named as in commands
		c = commandHelp{name: h.name, usage: "memunet " + h.name}
	}
	if len(c.subs) > 0 {
		fmt.Fprint(w, report.Wrap(strings.Fields(c.summary), helpWidth, "memunet "+c.name+": ", "  "))
		for _, s := range c.subs {
			var sub helpRequest
			if errors.As(helpOf(s), &sub) {
				fmt.Fprintln(w)
				writeHelp(w, sub)
			}
		}
		return
	}
	fmt.Fprint(w, report.Wrap(usageWords(c.usage), helpWidth, "usage: ", "         "))
	fmt.Fprintln(w)
	fmt.Fprint(w, report.Wrap(strings.Fields(c.summary), helpWidth, "memunet "+c.name+" ", ""))
	n := 0
	if h.flags != nil {
		h.flags.VisitAll(func(*flag.Flag) { n++ })
	}
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	h.flags.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(w, "  --%s", f.Name)
		if p := flagPlaceholder(c.usage, f); p != "" {
			fmt.Fprintf(w, " %s", p)
		}
		fmt.Fprintln(w)
		text := f.Usage
		if !isZeroDefault(f) && !strings.Contains(text, "(default") { // a default the text gives (--overlap's) is the one shown
			text += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprint(w, report.Wrap(strings.Fields(text), helpWidth, "        ", "        "))
	})
}

// flagPlaceholder is the word after --NAME in the synopsis ("FILE" in
// "--config FILE"), else the flag's value type; "" for a boolean flag.
func flagPlaceholder(usage string, f *flag.Flag) string {
	if m := regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + ` ([^\s\[\]-][^\s\]]*)`).FindStringSubmatch(usage); m != nil {
		return m[1]
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	name, _ := flag.UnquoteUsage(f)
	return name
}

// isZeroDefault reports whether a flag's default is its type's zero value
// (not worth printing), as flag.PrintDefaults decides.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "[]", "0s":
		return true
	}
	return false
}

// usageWords splits a synopsis into words, keeping each bracketed option
// ("[--set k=v ...]") whole so that wrapping never splits one.
func usageWords(s string) []string {
	var words []string
	depth, start := 0, -1
	for i, r := range s {
		switch {
		case r == ' ' && depth == 0:
			if start >= 0 {
				words = append(words, s[start:i])
				start = -1
			}
			continue
		case r == '[':
			depth++
		case r == ']' && depth > 0:
			depth--
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}
