package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// The generated part of docs/reference/help.md lies between these lines.
const (
	commandsPage  = "docs/reference/help.md"
	commandsBegin = "<!-- commands: generated from memunet help by go generate ./internal/docgen; do not edit -->"
	commandsEnd   = "<!-- end of commands -->"
)

// commandsPart is the generated part of help.md: "memunet help", then
// "memunet help NAME" for every command its usage lists, each verbatim.
func commandsPart(root string) (string, error) {
	bin, cleanup, err := buildMemunet(root)
	if err != nil {
		return "", err
	}
	defer cleanup()
	top, err := memunet(root, bin, "help")
	if err != nil {
		return "", err
	}
	names := commandNames(top)
	if len(names) < 10 {
		return "", fmt.Errorf("memunet help lists only %d commands: %q", len(names), names)
	}
	var b strings.Builder
	section(&b, "memunet --help", top)
	for _, name := range names {
		help, err := memunet(root, bin, append([]string{"help"}, strings.Fields(name)...)...)
		if err != nil {
			return "", err
		}
		section(&b, "memunet "+name, help)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// section writes one command's help under its heading, as a code block.
func section(b *strings.Builder, heading, text string) {
	fmt.Fprintf(b, "### %s\n\n```\n%s\n```\n\n", heading, strings.TrimRight(text, "\n"))
}

// commandNames are the commands of the usage lines of "memunet help"
// ("  memunet data check --config FILE ..." names "data check"), in order.
func commandNames(top string) []string {
	var names []string
	word := regexp.MustCompile(`^[a-z]+$`)
	for _, line := range strings.Split(top, "\n") {
		rest, ok := strings.CutPrefix(line, "  memunet ")
		if !ok {
			continue
		}
		var name []string
		for _, w := range strings.Fields(rest) {
			if !word.MatchString(w) {
				break
			}
			name = append(name, w)
		}
		if len(name) > 0 {
			names = append(names, strings.Join(name, " "))
		}
	}
	return names
}

// buildMemunet builds ./cmd/memunet of the module at root into a
// temporary folder; cleanup removes it.
func buildMemunet(root string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "docgen-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "memunet")
	cmd := exec.Command(goTool(), "build", "-o", bin, "./cmd/memunet")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build ./cmd/memunet: %v\n%s", err, out)
	}
	return bin, cleanup, nil
}

// memunet runs bin with args in root, as a user in a terminal-less shell
// would, and returns its standard output.
func memunet(root, bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Args[0] = "memunet" // as a user on whose PATH it is would see it
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "COLUMNS=", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("memunet %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.String(), nil
}

// goTool is the go command of the toolchain running this, else "go".
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}
