package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFuzzCommands: every fuzz command in docs/development.md stops
// by itself (-fuzztime), runs no other tests (-run '^$'), and names a fuzz
// target of the package it runs in; every fuzz target is listed.
func TestReadmeFuzzCommands(t *testing.T) {
	const page = "docs/development.md"
	readme, err := os.ReadFile("../../" + page)
	if err != nil {
		t.Fatal(err)
	}
	cmdRe := regexp.MustCompile(`go test [^\n` + "`" + `]*-fuzz (\w+)[^\n` + "`" + `]*`)
	listed := map[string]bool{}
	for _, m := range cmdRe.FindAllStringSubmatch(string(readme), -1) {
		line, name := m[0], m[1]
		if !strings.Contains(line, "-fuzztime ") || !strings.Contains(line, "-run '^$'") {
			t.Errorf("%s: %q lacks -fuzztime or -run '^$'", page, line)
		}
		pkg := regexp.MustCompile(`\./[\w/]+`).FindString(line)
		if pkg == "" {
			t.Errorf("%s: %q names no package", page, line)
			continue
		}
		if !hasFuzzTarget(t, filepath.Join("../..", pkg), name) {
			t.Errorf("%s: %q: no func %s(f *testing.F) in %s", page, line, name, pkg)
		}
		listed[name] = true
	}
	// Every fuzz target in the module is in the list.
	filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, m := range regexp.MustCompile(`func (Fuzz\w+)\(f \*testing\.F\)`).FindAllStringSubmatch(string(b), -1) {
			if !listed[m[1]] {
				t.Errorf("%s: %s is not among %s's fuzz commands", path, m[1], page)
			}
		}
		return nil
	})
	if len(listed) == 0 {
		t.Errorf("%s lists no fuzz commands", page)
	}
}

func hasFuzzTarget(t *testing.T, dir, name string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "func "+name+"(f *testing.F)") {
			return true
		}
	}
	return false
}

// TestReadmeListsEveryCommand: docs/reference/commands.md and help.md give
// every command's synopsis as help prints it, and commands.md's walk (the first sh block of
// "Every command, in order", which tools/check/readme-check.sh runs) uses
// every command; README's tour (the sh block of "A five-minute tour")
// trains, compares, plans, resumes and predicts.
func TestReadmeListsEveryCommand(t *testing.T) {
	const page = "docs/reference/commands.md"
	b, err := os.ReadFile("../../" + page)
	if err != nil {
		t.Fatal(err)
	}
	help, err := os.ReadFile("../../docs/reference/help.md") // the synopses, as help prints them
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(b)+string(help)), " ")
	walk := firstShBlock(t, string(b), "\n## Every command, in order\n", page)
	for _, c := range commands {
		if len(c.subs) > 0 {
			continue
		}
		if syn := strings.Join(strings.Fields(synopsis(c.usage)), " "); !strings.Contains(flat, syn) {
			t.Errorf("%s lacks %q", page, syn)
		}
		if !regexp.MustCompile(`(?m)^\./memunet ` + regexp.QuoteMeta(c.name) + `\b`).MatchString(walk) {
			t.Errorf("%s's walk does not run %q", page, c.name)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tour := firstShBlock(t, string(readme), "\n## A five-minute tour\n", "README.md")
	for _, re := range []string{`^\./memunet train .*--out runs/q\b`, `^\./memunet compare `, `^\./memunet plan `, `^\./memunet train .*--resume auto`, `^\./memunet predict `} {
		if !regexp.MustCompile(`(?m)` + re).MatchString(tour) {
			t.Errorf("README's tour has no line matching %s", re)
		}
	}
}

// firstShBlock is the first sh block of the section that starts with
// heading in text.
func firstShBlock(t *testing.T, text, heading, name string) string {
	t.Helper()
	_, section, ok := strings.Cut(text, heading)
	if !ok {
		t.Fatalf("%s has no %q section", name, strings.TrimSpace(heading))
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatalf("%s's %q section has no sh block", name, strings.TrimSpace(heading))
	}
	return block
}
