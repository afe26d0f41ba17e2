package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/memlimit"
	"github.com/memunet/memunet/predict"
	"github.com/memunet/memunet/rundir"
	"github.com/memunet/memunet/train"
)

// configCommand is the flag set of a command that reads a config: --config
// and repeatable --set, plus the command's own flags, which the caller adds
// to Flags before calling load.
type configCommand struct {
	Flags  *flag.FlagSet
	name   string // the command as typed, e.g. "data check"
	usage  string
	path   string
	sets   stringList
	device string
	// computes: the command runs on the config's device (checked by load).
	computes bool
	// noConfig, if set, says the flags given ask for a mode without a
	// config (compare --runs): load then returns errNoConfig.
	noConfig func() bool
}

// newFlags is the flag set of the command name (as typed: "data synth"):
// silent, since run prints its errors and help.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses a command's args into fs: -h/-help/--help is a help
// request, a bad flag or a stray argument a usage error naming the
// command, with its usage.
func parseFlags(fs *flag.FlagSet, args []string, usage string) error {
	if err := fs.Parse(args); err != nil {
		return flagError(fs, args, err, usage)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q; %s", fs.Name(), fs.Arg(0), usage)}
	}
	return nil
}

// errNoConfig is load's answer in a mode that needs no config.
var errNoConfig = errors.New("no config: the command's flags need none")

func newConfigCommand(name, usage string) *configCommand {
	c := &configCommand{Flags: newFlags(name), name: name, usage: usage}
	c.Flags.StringVar(&c.path, "config", "", "YAML config file")
	c.Flags.Var(&c.sets, "set", "override section.key=value (repeatable)")
	return c
}

// addDevice gives the command --device, which load turns into --set
// device=D (so that compare passes it on to its child runs too).
func (c *configCommand) addDevice() {
	c.computes = true
	c.Flags.StringVar(&c.device, "device", "", deviceFlagHelp)
}

// load parses args and loads the config with the overrides. A bad flag, a
// stray argument and a missing --config are usage errors naming the command;
// -h/-help/--help a help request.
func (c *configCommand) load(args []string) (config.Config, error) {
	if err := parseFlags(c.Flags, args, c.usage); err != nil {
		return config.Config{}, err
	}
	if c.path == "" {
		if c.noConfig != nil && c.noConfig() {
			return config.Config{}, errNoConfig
		}
		return config.Config{}, c.usageError("--config FILE is required (configs/quickstart.yaml is an example)")
	}
	c.sets = withDevice(c.sets, c.device)
	cfg, err := config.Invocation{Program: config.InvokedAs(), Config: c.path, Sets: c.sets}.Load()
	if err == nil && c.computes {
		_, err = device.Open(cfg.Device) // before any work: "cuda" in the CPU build says how to get the gpu build
	}
	return cfg, err
}

// deviceFlagHelp is the text of every command's --device.
const deviceFlagHelp = "what to compute on: auto, cpu, cuda or cuda:N (default: the config's device)"

// withDevice is sets with --set device=D appended when --device D was given.
func withDevice(sets []string, device string) []string {
	if device == "" {
		return sets
	}
	return append(append([]string(nil), sets...), "device="+device)
}

func (c *configCommand) usageError(msg string) error {
	return usageError{fmt.Sprintf("%s: %s; %s", c.name, msg, c.usage)}
}

// modelFlags are the flags predict and eval share: the checkpoint, and
// how its model runs.
type modelFlags struct {
	checkpoint, precision, capacity *string
	newest                          *bool
	batch                           *int
}

func addModelFlags(fs *flag.FlagSet) modelFlags {
	return modelFlags{
		checkpoint: fs.String("checkpoint", "", "checkpoint directory, or a run directory: its best checkpoint by val_miou (--newest: its newest)"),
		newest:     fs.Bool("newest", false, "with a run directory, use its newest checkpoint instead of its best"),
		precision:  fs.String("precision", "", "fp32, fp16 or bf16 (default: the checkpoint's train.precision)"),
		capacity:   fs.String("capacity", "", "memory pool capacity such as 6GiB (default: the checkpoint's memory.capacity)"),
		batch:      fs.Int("batch", 0, "images per forward pass (default: the checkpoint's train.batch_size)"),
	}
}

// capacityOf is value (--capacity; "": cfg's memory.capacity) in bytes,
// auto resolved for cfg's device, with the note saying what auto chose.
func capacityOf(command, value string, cfg config.Config) (int64, string, error) {
	c := cfg.Memory.Capacity
	if value != "" {
		var err error
		if c, err = config.ParseByteSize(value); err != nil {
			return 0, "", usageError{command + ": --capacity: " + err.Error()}
		}
	}
	if c != config.CapacityAuto {
		return int64(c), "", nil
	}
	return train.AutoCapacity(cfg)
}

// predictor builds ck's model for command as the flags say (precision,
// batch), with the limits its batches are planned against: the pool's
// capacity (--capacity, else the checkpoint's memory.capacity; auto: the
// device's free memory) and the memory this process may use, read before the
// model takes its share (the plans count the weights). What the user
// should know as it happens goes to stderr.
func (f modelFlags) predictor(command string, ck *checkpoint.Checkpoint) (*predict.Predictor, predict.Limits, backend.DType, error) {
	cfg := ck.Config
	prec, batch := cfg.Train.Precision, *f.batch
	var err error
	if *f.precision != "" {
		if prec, err = backend.ParsePrecision(*f.precision); err != nil {
			return nil, predict.Limits{}, prec, usageError{command + ": --precision " + err.Error()}
		}
	}
	if batch == 0 {
		batch = cfg.Train.BatchSize
	}
	capBytes, _, err := capacityOf(command, *f.capacity, cfg)
	if err != nil {
		return nil, predict.Limits{}, prec, err
	}
	lim := predict.HostLimits(capBytes, memlimit.Read())
	p, err := predict.NewPredictor(ck, prec, lim.Capacity, batch)
	if err != nil {
		return nil, lim, prec, err
	}
	p.Note = os.Stderr
	p.Progress = rundir.BarWriter(os.Stderr, cfg.Output.Progress) // a terminal's bar with the ETA
	return p, lim, prec, nil
}
