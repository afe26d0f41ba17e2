package config

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Invocation is how the user ran memunet: the program as they invoked it
// and the config flags they gave. Hints are written with it, so that each
// is a command the user can paste: the same binary, the same --config and
// --set flags (a hint that dropped them would check another dataset).
type Invocation struct {
	// Program is the command as the user typed it: "memunet" (found on
	// PATH), "./memunet", or "go run ./cmd/memunet". "" reads "memunet".
	Program string
	// Config is --config as given ("" if none); Sets the --set overrides,
	// in order.
	Config string
	Sets   []string
}

// ProgramName is how argv0 (os.Args[0]) was invoked: "go run ./cmd/memunet"
// for a binary go run built in its cache, the bare name for one found on
// PATH, else the path as typed.
func ProgramName(argv0 string) string {
	if strings.Contains(filepath.ToSlash(argv0), "/go-build") {
		return "go run ./cmd/memunet"
	}
	return argv0
}

// InvokedAs is ProgramName of this process.
func InvokedAs() string { return ProgramName(os.Args[0]) }

// Run is the command line of sub (e.g. "export") with args, without the
// config flags.
func (inv Invocation) Run(sub string, args ...string) string {
	words := []string{inv.program()}
	words = append(words, strings.Fields(sub)...)
	for _, a := range args {
		words = append(words, Quote(a))
	}
	return strings.Join(words, " ")
}

// Command is the command line of sub with the same --config and --set
// flags, then args. A --set in args replaces the user's --set of the same
// key rather than following it.
func (inv Invocation) Command(sub string, args ...string) string {
	replaced := map[string]bool{}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--set" {
			replaced[setKey(args[i+1])] = true
		}
	}
	var flags []string
	if inv.Config != "" {
		flags = append(flags, "--config", inv.Config)
	}
	for _, s := range inv.Sets {
		if !replaced[setKey(s)] {
			flags = append(flags, "--set", s)
		}
	}
	return inv.Run(sub, append(flags, args...)...)
}

// setKey is the key of a --set override "section.key=value".
func setKey(set string) string {
	key, _, _ := strings.Cut(set, "=")
	return strings.TrimSpace(key)
}

func (inv Invocation) program() string {
	if inv.Program == "" {
		return "memunet"
	}
	return inv.Program
}

// Quote is s as one word of a POSIX shell: as it is where every byte is
// safe, else in single quotes.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// GivenFlags are the flags the user gave fs, as "--name value" words
// ("--name" alone for a true bool), but those in skip: what a hint
// repeats so that its command is the user's. The order is fs's (by name).
func GivenFlags(fs *flag.FlagSet, skip ...string) []string {
	var words []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if f.Value.String() == "true" {
				words = append(words, "--"+f.Name)
			}
			return
		}
		words = append(words, "--"+f.Name, f.Value.String())
	})
	return words
}
