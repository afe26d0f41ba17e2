package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memunet/memunet/config"
	"github.com/memunet/memunet/configs"
)

// runOut runs memunet with args and returns its exit code, stdout and stderr.
func runOut(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestTopLevelHelp: "memunet --help", "-h", "-help" and "help" print the
// overall usage to stdout and exit 0 (they printed "flag: help requested"
// and exited 2); no command at all is still a usage error.
func TestTopLevelHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help", "help"} {
		code, out, errOut := runOut(arg)
		if code != 0 || out != topUsage() || errOut != "" {
			t.Errorf("memunet %s: exit %d, stderr %q, stdout %q", arg, code, errOut, out)
		}
	}
	if code, out, errOut := runOut(); code != 2 || out != "" || errOut != topUsage() {
		t.Errorf("memunet: exit %d, stdout %q, stderr %q; want the usage on stderr, exit 2", code, out, errOut)
	}
}

// TestCommandHelp: "memunet help CMD", "memunet CMD --help", "CMD -h" and
// "CMD -help" print the same help to stdout and exit 0, for every command.
func TestCommandHelp(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			words := strings.Fields(c.name)
			code, want, errOut := runOut(append([]string{"help"}, words...)...)
			if code != 0 || errOut != "" || want == "" {
				t.Fatalf("memunet help %s: exit %d, stderr %q, stdout %q", c.name, code, errOut, want)
			}
			for _, h := range []string{"--help", "-h", "-help"} {
				code, out, errOut := runOut(append(slices.Clone(words), h)...)
				if code != 0 || errOut != "" || out != want {
					t.Errorf("memunet %s %s: exit %d, stderr %q; stdout differs from memunet help %s:\n%s",
						c.name, h, code, errOut, c.name, out)
				}
			}
			if strings.Contains(want, "help requested") {
				t.Errorf("help of %s: %q", c.name, want)
			}
			for _, line := range strings.Split(want, "\n") {
				if len(line) > 80 {
					t.Errorf("help of %s: line over 80 columns: %q", c.name, line)
				}
			}
			if c.usage != "" && !strings.HasPrefix(want, "usage: memunet "+c.name) {
				t.Errorf("help of %s does not start with its usage:\n%s", c.name, want)
			}
			for _, sub := range c.subs {
				if !strings.Contains(want, "usage: memunet "+sub) {
					t.Errorf("help of %s lacks %s's usage:\n%s", c.name, sub, want)
				}
			}
		})
	}
	for _, line := range strings.Split(topUsage(), "\n") {
		if len(line) > 80 {
			t.Errorf("usage: line over 80 columns: %q", line)
		}
	}
}

// TestHelpListsEveryFlag walks each command's own FlagSet (the one it
// parses) and checks that every flag is in the command's synopsis, in the
// top-level usage and in its --help with its default: a flag added without
// its usage fails here.
func TestHelpListsEveryFlag(t *testing.T) {
	top := strings.Join(strings.Fields(topUsage()), " ")
	seen := map[string][]string{}
	for _, c := range commands {
		if len(c.subs) > 0 || c.name == "help" {
			continue
		}
		var h helpRequest
		if err := helpOf(c.name); !errors.As(err, &h) {
			t.Fatalf("%s --help: %v", c.name, err)
		}
		_, out, _ := runOut(append(strings.Fields(c.name), "--help")...)
		syn := synopsis(c.usage)
		if !strings.Contains(top, strings.Join(strings.Fields(syn), " ")) {
			t.Errorf("the top-level usage lacks %q", syn)
		}
		if h.flags == nil {
			continue
		}
		h.flags.VisitAll(func(f *flag.Flag) {
			seen[c.name] = append(seen[c.name], f.Name)
			named := regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `([\s\]]|$)`)
			if !named.MatchString(syn) {
				t.Errorf("%s: --%s is not in its usage %q", c.name, f.Name, syn)
			}
			line := regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(f.Name) + `( \S+)?$`)
			if !line.MatchString(out) {
				t.Errorf("%s --help does not list --%s:\n%s", c.name, f.Name, out)
			}
			if !isZeroDefault(f) && !strings.Contains(f.Usage, "(default") && !strings.Contains(strings.Join(strings.Fields(out), " "), "(default "+f.DefValue+")") {
				t.Errorf("%s --help does not give --%s's default %q:\n%s", c.name, f.Name, f.DefValue, out)
			}
			// A flag whose text gives its default shows that one only
			// (--overlap's -1 means "predict.overlap, 0.25").
			if strings.Contains(f.Usage, "(default") && strings.Contains(strings.Join(strings.Fields(out), " "), "(default "+f.DefValue+")") {
				t.Errorf("%s --help gives --%s two defaults:\n%s", c.name, f.Name, out)
			}
		})
	}
	// The walk saw the flags the issue found missing from the usage.
	for cmd, flags := range map[string][]string{
		"train":      {"config", "set", "out", "resume", "force"},
		"predict":    {"checkpoint", "input", "out", "newest", "overlay", "precision", "capacity", "batch"},
		"export":     {"checkpoint", "out", "dtype"},
		"data synth": {"out", "count", "size", "classes", "seed", "noise"},
		"data check": {"config", "set"},
		"plan":       {"config", "set", "capacity", "variants", "json", "suggest"},
		"compare":    {"config", "set", "variants", "steps", "out"},
		"bench":      {"config", "set", "steps", "variants", "cpuprofile"},
		"gorgonia":   {"config", "set", "out", "steps"},
	} {
		for _, f := range flags {
			if !slices.Contains(seen[cmd], f) {
				t.Errorf("%s: the FlagSet walked has %v, not --%s", cmd, seen[cmd], f)
			}
		}
	}
}

// TestHelpUnknownCommand: "memunet help nosuch" is a usage error naming the
// commands.
func TestHelpUnknownCommand(t *testing.T) {
	code, out, errOut := runOut("help", "nosuch")
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	for _, w := range []string{`"nosuch"`, "train", "predict", "data synth", "config print", "version"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr %q lacks %s", errOut, w)
		}
	}
}

// TestBadFlagGivesFullUsage: a bad flag is still a usage error (exit 2),
// and the usage it prints names every flag (train's named no --resume).
func TestBadFlagGivesFullUsage(t *testing.T) {
	code, _, errOut := runOut("train", "--bogus")
	if code != 2 || !strings.Contains(errOut, "-bogus") || !strings.Contains(errOut, "--resume") || !strings.Contains(errOut, "--force") {
		t.Errorf("train --bogus: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runOut("data", "synth", "--bogus")
	if code != 2 || !strings.Contains(errOut, "--noise") {
		t.Errorf("data synth --bogus: exit %d, stderr %q", code, errOut)
	}
}

// TestConfigPrint: "memunet config print NAME" prints configs/NAME.yaml
// byte for byte (default quickstart), and what it prints loads as a config
// from another directory. The configs use the synthetic data, so no path in
// them is relative to configs/: data.path is "" (quickstart) or absent.
func TestConfigPrint(t *testing.T) {
	dir := t.TempDir()
	for _, name := range configs.Names() {
		code, out, errOut := runOut("config", "print", name)
		if code != 0 || errOut != "" {
			t.Fatalf("config print %s: exit %d, stderr %q", name, code, errOut)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "configs", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("config print %s differs from configs/%s.yaml", name, name)
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, nil)
		if err != nil {
			t.Errorf("config print %s does not load: %v", name, err)
			continue
		}
		if cfg.Data.Source != "synthetic" || cfg.Data.Path != "" {
			t.Errorf("config print %s: data.source %q, data.path %q: a path would be relative to the directory it is run in",
				name, cfg.Data.Source, cfg.Data.Path)
		}
	}
	code, out, _ := runOut("config", "print")
	if want, _ := configs.Read("quickstart"); code != 0 || out != string(want) {
		t.Errorf("config print: exit %d; want quickstart.yaml", code)
	}
	code, out, errOut := runOut("config", "list")
	if code != 0 || errOut != "" {
		t.Fatalf("config list: exit %d, stderr %q", code, errOut)
	}
	for _, name := range configs.Names() {
		if !strings.Contains(out, name+" ") {
			t.Errorf("config list lacks %s:\n%s", name, out)
		}
	}
	for _, args := range [][]string{{"config", "print", "nosuch"}, {"config", "print", "fp16", "bf16"}, {"config"}, {"config", "show"}} {
		code, _, errOut := runOut(args...)
		if code != 2 || !strings.Contains(errOut, "config") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}
	if _, _, errOut := runOut("config", "print", "nosuch"); !strings.Contains(errOut, "quickstart, ") || !strings.Contains(errOut, "fp16") {
		t.Errorf("config print nosuch: stderr %q does not list the names", errOut)
	}
}
