package main

import (
	"fmt"
	"path/filepath"

	"github.com/memunet/memunet/checkpoint"
	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/runfiles"
)

// trainSetup resolves train's configuration and run directory. Without
// --resume it is --config (required) with --set. With --resume auto|PATH the
// configuration is --config's if given, else the checkpoint's own with --set
// applied; the run directory defaults to the checkpoint's run (the folder
// above its checkpoints/). It returns what to pass as rundir.Options.Resume.
func trainSetup(configPath, outDir, resume string, sets []string) (cfg config.Config, dir, resumeArg string, err error) {
	inv := config.Invocation{Program: config.InvokedAs(), Config: configPath, Sets: sets}
	if resume == "" {
		if configPath == "" {
			return cfg, "", "", usageError{"train: --config FILE is required (configs/quickstart.yaml is an example)"}
		}
		cfg, err = inv.Load()
		return cfg, outDir, "", err
	}
	ckDir := ""
	if resume == "auto" {
		if outDir == "" && configPath != "" {
			if cfg, err = inv.Load(); err != nil {
				return cfg, "", "", err
			}
			outDir = cfg.Output.Dir
		}
		if outDir == "" {
			return cfg, "", "", usageError{"train: --resume auto continues the run in --out DIR (or output.dir); name it; " + trainUsage}
		}
		if ckDir, err = checkpoint.ResolveResume("auto", outDir); err != nil {
			return cfg, "", "", err
		}
		if ckDir == "" && configPath == "" {
			return cfg, "", "", fmt.Errorf("train: --resume auto: no checkpoint in %s, and no --config to start from", filepath.Join(outDir, runfiles.Checkpoints))
		}
		resumeArg = "auto"
	} else {
		if ckDir, err = checkpoint.ResolveResume(resume, ""); err != nil {
			return cfg, "", "", err
		}
		resumeArg = ckDir
	}
	switch {
	case configPath != "":
		if cfg, err = inv.Load(); err != nil {
			return cfg, "", "", err
		}
	default:
		if cfg, err = checkpoint.ReadConfig(ckDir, sets); err != nil {
			return cfg, "", "", err
		}
		cfg.Invocation = checkpointInvocation(ckDir, sets)
	}
	if outDir == "" {
		outDir = cfg.Output.Dir
	}
	if outDir == "" && ckDir != "" {
		outDir = checkpoint.RunDirOf(ckDir)
	}
	return cfg, outDir, resumeArg, nil
}
