package rundir

import (
	"fmt"
	"path/filepath"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/runfiles"
)

// UsageError is a command refused for how it was called (memunet exits
// 2), its message naming the command and ending with its usage.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// TrainArgs are what train was asked on its command line: --config,
// --out, --resume (auto or a path) and the --set flags, with the
// command's usage for a refusal.
type TrainArgs struct {
	Config, Out, Resume string
	Sets                []string
	Usage               string
}

// ResolveTrain is train's configuration and run directory. Without
// --resume it is --config (required) with --set. With --resume auto|PATH
// the configuration is --config's if given, else the checkpoint's own
// with --set applied; the run directory defaults to the checkpoint's run
// (the folder above its checkpoints/). resume is what to pass as
// Options.Resume; dir may be empty (DirOf makes one).
func ResolveTrain(a TrainArgs) (cfg config.Config, dir, resume string, err error) {
	inv := config.Invocation{Program: config.InvokedAs(), Config: a.Config, Sets: a.Sets}
	outDir := a.Out
	if a.Resume == "" {
		if a.Config == "" {
			return cfg, "", "", &UsageError{"train: --config FILE is required (configs/quickstart.yaml is an example)"}
		}
		cfg, err = inv.Load()
		return cfg, outDir, "", err
	}
	ckDir := ""
	if a.Resume == "auto" {
		if outDir == "" && a.Config != "" {
			if cfg, err = inv.Load(); err != nil {
				return cfg, "", "", err
			}
			outDir = cfg.Output.Dir
		}
		if outDir == "" {
			return cfg, "", "", &UsageError{"train: --resume auto continues the run in --out DIR (or output.dir); name it; " + a.Usage}
		}
		if ckDir, err = checkpoint.ResolveResume("auto", outDir); err != nil {
			return cfg, "", "", err
		}
		if ckDir == "" && a.Config == "" {
			return cfg, "", "", fmt.Errorf("train: --resume auto: no checkpoint in %s, and no --config to start from", filepath.Join(outDir, runfiles.Checkpoints))
		}
		resume = "auto"
	} else {
		if ckDir, err = checkpoint.ResolveResume(a.Resume, ""); err != nil {
			return cfg, "", "", err
		}
		resume = ckDir
	}
	switch {
	case a.Config != "":
		if cfg, err = inv.Load(); err != nil {
			return cfg, "", "", err
		}
	default:
		if cfg, err = checkpoint.ReadConfig(ckDir, a.Sets); err != nil {
			return cfg, "", "", err
		}
		cfg.Invocation = checkpoint.InvocationOf(ckDir, a.Sets)
	}
	if outDir == "" {
		outDir = cfg.Output.Dir
	}
	if outDir == "" && ckDir != "" {
		outDir = checkpoint.RunDirOf(ckDir)
	}
	return cfg, outDir, resume, nil
}
