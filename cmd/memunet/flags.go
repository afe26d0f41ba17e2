package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/memunet/memunet/config"
)

// configCommand is the flag set of a command that reads a config: --config
// and repeatable --set, plus the command's own flags, which the caller adds
// to Flags before calling load.
type configCommand struct {
	Flags *flag.FlagSet
	name  string // the command as typed, e.g. "data check"
	usage string
	path  string
	sets  stringList
}

func newConfigCommand(name, usage string) *configCommand {
	c := &configCommand{Flags: flag.NewFlagSet(name, flag.ContinueOnError), name: name, usage: usage}
	c.Flags.SetOutput(io.Discard)
	c.Flags.StringVar(&c.path, "config", "", "YAML config file")
	c.Flags.Var(&c.sets, "set", "override section.key=value (repeatable)")
	return c
}

// load parses args and loads the config with the overrides. A bad flag, a
// stray argument and a missing --config are usage errors naming the command;
// -h/-help/--help a help request.
func (c *configCommand) load(args []string) (config.Config, error) {
	if err := c.Flags.Parse(args); err != nil {
		return config.Config{}, flagError(c.Flags, err, c.usage)
	}
	if c.Flags.NArg() > 0 {
		return config.Config{}, c.usageError(fmt.Sprintf("unexpected argument %q", c.Flags.Arg(0)))
	}
	if c.path == "" {
		return config.Config{}, c.usageError("--config FILE is required (configs/quickstart.yaml is an example)")
	}
	return config.Load(c.path, c.sets)
}

func (c *configCommand) usageError(msg string) error {
	return usageError{fmt.Sprintf("%s: %s; %s", c.name, msg, c.usage)}
}
