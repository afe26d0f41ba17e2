package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/outdir"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/train"
)

const (
	dataCheckUsage   = "usage: memunet data check --config FILE [--set k=v ...]"
	dataSynthUsage   = "usage: memunet data synth --out DIR [--count N] [--size S] [--classes K] [--seed N] [--noise X] [--force]"
	dataPreviewUsage = "usage: memunet data preview --config FILE [--set k=v ...] [--out FILE] [--count N] [--epoch E]"
	dataUsage        = dataCheckUsage + " | " + dataSynthUsage + " | " + dataPreviewUsage
)

// dataCommand runs "memunet data check" and "memunet data synth".
func dataCommand(args []string, stdout io.Writer, sig *rundir.Interrupt) error {
	if len(args) == 0 {
		return usageError{"data: which? " + dataUsage}
	}
	switch args[0] {
	case "check":
		sig.AtOnce("data check", "nothing was written")
		return dataCheck(args[1:], stdout)
	case "synth":
		sig.AtOnce("data synth", "nothing was written")
		return dataSynth(args[1:], stdout, sig)
	case "preview":
		sig.AtOnce("data preview", "")
		return dataPreview(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		return helpRequest{name: "data"}
	}
	return usageError{fmt.Sprintf("data: unknown subcommand %q; %s", args[0], dataUsage)}
}

// dataCheck reads the configured dataset in full and prints counts, sizes,
// the mask-value histogram, the value -> class mapping and every problem.
func dataCheck(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("data check", dataCheckUsage)
	cfg, err := cmd.load(args)
	if err != nil {
		return err
	}
	rep, err := data.Check(cfg.DataConfig())
	if err != nil {
		return err
	}
	rep.Write(stdout)
	switch n := len(rep.Fatal()); {
	case n == 1:
		return fmt.Errorf("data check: 1 problem stops training (listed above, with its file)")
	case n > 1:
		return fmt.Errorf("data check: %d problems stop training (listed above, each with its file)", n)
	}
	fmt.Fprintln(stdout, "ok: the dataset is ready to train on")
	return nil
}

// dataSynth writes the built-in synthetic set in the folder layout.
func dataSynth(args []string, stdout io.Writer, sig *rundir.Interrupt) error {
	fs := newFlags("data synth")
	out := fs.String("out", "", "directory to write images/ and masks/ into")
	count := fs.Int("count", 64, "number of samples (at least 1)")
	size := fs.Int("size", 64, fmt.Sprintf("image height and width (%d..%d)", data.MinSyntheticSize, data.MaxSyntheticSize))
	classes := fs.Int("classes", 4, fmt.Sprintf("classes incl. background (%d..%d)", data.MinSyntheticClasses, data.MaxSyntheticClasses))
	seed := fs.Uint64("seed", 1, "generation seed")
	noise := fs.Float64("noise", 0.1, "noise std on [0,1] intensities (0..1; 0: none)")
	force := fs.Bool("force", false, "replace a set a killed data synth left in --out (only the files its .unfinished lists)")
	if err := parseFlags(fs, args, dataSynthUsage); err != nil {
		return err
	}
	if *out == "" {
		return usageError{"data synth: --out DIR is required"}
	}
	// Exact: a flag given as 0 is checked as 0 (--noise 0 is no noise;
	// --size 0 an error), never taken for "the default".
	syn, err := data.NewSyntheticExact(data.SyntheticConfig{Count: *count, Size: *size, Classes: *classes, Seed: *seed, Noise: *noise})
	if err != nil {
		return usageError{"data synth: " + strings.NewReplacer("data.count", "--count", "data.size", "--size", "data.classes", "--classes", "data.noise", "--noise").Replace(err.Error())}
	}
	replace := config.Invocation{Program: config.InvokedAs()}.Run("data synth", append(config.GivenFlags(fs, "force"), "--force")...)
	// Before the folder is made: the deferred Clear and WriteFolderUntil clean up.
	stop := sig.Cooperate("stopping at once; what it wrote into " + *out + " stays, listed in its .unfinished: replace it with " + replace)
	lock, err := outdir.Acquire(*out, "memunet data synth")
	if err != nil {
		return err
	}
	defer lock.Clear() // no lock file stays beside the samples; a folder made for a refused synth goes
	err = data.WriteFolderUntil(stop, syn, *out, data.FolderOptions{Force: *force, Replace: replace})
	if st := sig.Stopped(err, "data synth", "removed the samples it had written into "+*out); st != 0 {
		return exitStatus(st)
	}
	if err != nil {
		return err
	}
	vals := make([]string, *classes)
	for k := range vals {
		vals[k] = fmt.Sprint(k)
	}
	fmt.Fprintf(stdout, "wrote %d samples to %s and %s: %dx%d RGB PNG images, and masks as palette PNGs whose pixel values (palette indices) are the classes 0..%d (shown in color)\n",
		syn.Len(), filepath.Join(*out, "images"), filepath.Join(*out, "masks"), *size, *size, *classes-1)
	inv := config.Invocation{Program: config.InvokedAs(), Config: "quickstart",
		Sets: []string{"data.source=folder", "data.path=" + *out, fmt.Sprintf("model.classes=%d", *classes)}}
	fmt.Fprintf(stdout, "check and train on them with\n  %s\n  %s\n",
		inv.Command("data check"), inv.Command("train", "--set", "data.mask_values=["+strings.Join(vals, ",")+"]"))
	return nil
}

// dataPreview draws training samples as an epoch of training sees them:
// data.flip and data.augment applied with the run's draws.
func dataPreview(args []string, stdout io.Writer) error {
	cmd := newConfigCommand("data preview", dataPreviewUsage)
	out := cmd.Flags.String("out", filepath.Join("runs", "data-preview.png"), "the PNG to write")
	count := cmd.Flags.Int("count", 8, "training samples to draw")
	epoch := cmd.Flags.Int("epoch", 1, "the (1-based) epoch whose augmentation to show")
	cfg, err := cmd.load(args)
	if err != nil {
		return err
	}
	if *count < 1 || *epoch < 1 {
		return cmd.usageError("--count and --epoch must be at least 1")
	}
	if !strings.EqualFold(filepath.Ext(*out), ".png") { // not a run's config.yaml, not a note
		return cmd.usageError("--out " + *out + ": name a .png file, e.g. runs/data-preview.png")
	}
	if err := checkpoint.CheckNotInRun(*out, cfg.Data.Path); err != nil {
		return cmd.usageError("--out " + err.Error())
	}
	set, err := train.OpenSet(cfg)
	if err != nil {
		return err
	}
	idx := set.Train[:min(*count, len(set.Train))]
	img, err := data.Preview(set.Data, idx, data.LoaderConfig{Seed: cfg.Train.Seed, Flip: cfg.Data.Flip, Augment: cfg.Data.Augment}, *epoch-1)
	if err != nil {
		return err
	}
	if err := data.WritePreview(*out, img); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d training samples as epoch %d sees them (image, then mask)\n", *out, len(idx), *epoch)
	return nil
}
