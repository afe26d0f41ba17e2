package main

import (
	"fmt"
	"io"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/configs"
)

const (
	configPrintUsage = "usage: memunet config print [NAME]"
	configListUsage  = "usage: memunet config list"
	configUsage      = configPrintUsage + " | " + configListUsage
)

// configsCommand runs "memunet config print" and "memunet config list": the
// commented configs embedded in the binary (package configs).
func configsCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"config: which? " + configUsage}
	}
	switch args[0] {
	case "print":
		return configPrint(args[1:], stdout)
	case "list":
		return configList(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		return helpRequest{name: "config"}
	}
	return usageError{fmt.Sprintf("config: unknown subcommand %q; %s", args[0], configUsage)}
}

// configPrint writes the config NAME (default quickstart) exactly as the
// file in configs/, comments included.
func configPrint(args []string, stdout io.Writer) error {
	fs := newFlags("config print")
	if err := fs.Parse(args); err != nil {
		return flagError(fs, args, err, configPrintUsage)
	}
	if fs.NArg() > 1 {
		return usageError{fmt.Sprintf("config print: unexpected argument %q; %s", fs.Arg(1), configPrintUsage)}
	}
	name := configs.Default
	if fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	src, err := configs.Read(name)
	if err != nil {
		return usageError{"config print: " + err.Error()}
	}
	_, err = stdout.Write(src)
	return err
}

// configList names the embedded configs, each with its first comment line.
func configList(args []string, stdout io.Writer) error {
	fs := newFlags("config list")
	if err := parseFlags(fs, args, configListUsage); err != nil {
		return err
	}
	for _, name := range configs.Names() {
		d, err := configs.Describe(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-11s %s\n", name, d)
	}
	fmt.Fprintf(stdout, "use one by name (--config fp16), or print it to edit: %s > my.yaml\n", config.Invocation{Program: config.InvokedAs()}.Run("config print", "fp16"))
	return nil
}
