// Command memunet trains UNet segmentation models in Go with every
// memory-saving remedy measured. Run "memunet help" for the commands.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/dist"
	"github.com/memunet/memunet/rundir"
)

// version is memunet's release; the build can override it with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

const trainUsage = "usage: memunet train --config FILE [--set section.key=value ...] [--out DIR] [--resume auto|PATH] [--allow-data-change] [--force] [--device D] [--init PATH]"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns the exit code: 0 on success, 1 on a
// failed run, 2 on a usage error, 128 + the signal's number for a command
// stopped by SIGINT (130) or SIGTERM (143), in any phase. Errors are
// printed as one line to stderr.
// -h, -help or --help anywhere a command parses flags, and "memunet help
// CMD", print the command's help to stdout and exit 0.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
		return 2
	}
	// From the start: no phase may die of a signal without a word.
	sig := rundir.NotifyCommand(stderr, args[0])
	defer sig.Stop()
	err := dispatch(args, stdout, stderr, sig)
	if err == nil {
		return 0
	}
	if h := (helpRequest{}); errors.As(err, &h) {
		writeHelp(stdout, h)
		return 0
	}
	if st := exitStatus(0); errors.As(err, &st) {
		return int(st) // said already
	}
	fmt.Fprintf(stderr, "memunet: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	if errors.As(err, new(usageError)) || errors.As(err, new(*rundir.UsageError)) {
		return 2
	}
	return 1
}

// dispatch runs the command args name, with sig its handling of the
// signals (nil: none); a help request comes back as a helpRequest error
// for run to print.
func dispatch(args []string, stdout, stderr io.Writer, sig *rundir.Interrupt) error {
	switch args[0] {
	case "train":
		return trainCommand(args[1:], stdout, sig)
	case "cv":
		return cvCommand(args[1:], stdout, sig)
	case "plan":
		return planCommand(args[1:], stdout)
	case "gorgonia":
		return gorgoniaCommand(args[1:], stdout)
	case "compare":
		return compareCommand(args[1:], stdout, sig)
	case "bench":
		return benchCommand(args[1:], stdout)
	case "data":
		return dataCommand(args[1:], stdout, sig)
	case "config":
		return configsCommand(args[1:], stdout)
	case "predict":
		return predictCommand(args[1:], stdout, stderr, sig)
	case "export":
		return exportCommand(args[1:], stdout)
	case "eval":
		return evalCommand(args[1:], stdout, sig)
	case "version", "--version":
		if len(args) > 1 && isHelpArg(args[1]) {
			return helpRequest{name: "version"}
		}
		fmt.Fprintf(stdout, "memunet %s\n", version)
		return nil
	case "help", "-h", "-help", "--help":
		return helpCommand(args[1:], stdout)
	}
	return usageError{fmt.Sprintf("unknown command %q; %sthe commands are %s; run %s", args[0], config.DidYouMean(args[0], strings.Split(commandNames(), ", ")), commandNames(), config.Invocation{Program: config.InvokedAs()}.Run("help"))}
}

// exitStatus ends a command that has said what happened with a status of
// its own (an interrupted run: 128 + the signal's number).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func trainCommand(args []string, stdout io.Writer, sig *rundir.Interrupt) (err error) {
	sig.AtOnce("train", "nothing was written")
	fs := newFlags("train")
	configPath := fs.String("config", "", "YAML config file")
	outDir := fs.String("out", "", "directory for the run's files")
	resume := fs.String("resume", "", "continue from a checkpoint: auto (the newest in --out) or PATH")
	allowData := fs.Bool("allow-data-change", false, "with --resume, continue although the dataset changed since the checkpoint (files added, removed, renamed, resized or rewritten)")
	force := fs.Bool("force", false, "start a new run in a directory that holds one, deleting the earlier run's files and the outputs made from it there (the refusal without --force lists them)")
	var sets stringList
	fs.Var(&sets, "set", "override section.key=value (repeatable)")
	dev := fs.String("device", "", deviceFlagHelp)
	initFrom := fs.String("init", "", "fine-tune: start from these weights (train.init: a run or checkpoint directory, or a safetensors file)")
	if err := parseFlags(fs, args, trainUsage); err != nil {
		return err
	}
	// Started by mpirun: one rank of a data-parallel run (a build without
	// MPI refuses, rather than let every rank train alone into one
	// directory); rank 0 writes and reports.
	comm, err := dist.Open()
	if err != nil {
		return err
	}
	defer comm.Close()
	if comm.Rank() != 0 {
		stdout = io.Discard
	}
	all := withDevice(sets, *dev)
	if *initFrom != "" {
		all = append(all, "train.init="+strconv.Quote(*initFrom))
	}
	cfg, dir, resumeArg, err := rundir.ResolveTrain(rundir.TrainArgs{Config: *configPath, Out: *outDir, Resume: *resume, Sets: all, Usage: trainUsage})
	if err != nil {
		return err
	}
	dir = rundir.DirOf(dir, cfg, time.Now())
	ctx := sig.CooperateTrain()
	banner := func(cfg config.Config, device string) {
		fmt.Fprintln(stdout, rundir.Banner(version, cfg, device, comm, dir))
	}
	sum, err := rundir.Run(ctx, cfg, rundir.Options{OutDir: dir, Progress: stdout, Terminal: rundir.IsTerminal(stdout), Resume: resumeArg,
		Version: version, Force: *force, AllowDataChange: *allowData, OnStart: banner, Comm: comm})
	if fin := (*rundir.FinishedError)(nil); errors.As(err, &fin) {
		fmt.Fprintln(stdout, fin.Error()) // not a failure: the run is done, and stays as it was
		return nil
	}
	if st := sig.Stopped(err, "train", "nothing was written"); st != 0 {
		return exitStatus(st)
	}
	if err != nil {
		return err
	}
	if sum.Interrupted {
		fmt.Fprintf(stdout, "interrupted after step %d; saved %s; continue with: %s\n", sum.Steps, sum.LastCheckpoint,
			config.Invocation{Program: config.InvokedAs()}.Run("train", "--resume", "auto", "--out", dir))
		defer func() {
			if err == nil {
				err = exitStatus(sig.Status())
			}
		}()
	}
	sum.Print(stdout, dir)
	return nil
}
