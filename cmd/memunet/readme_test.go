package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFuzzCommands: every fuzz command in README.md stops by itself
// (-fuzztime), runs no other tests (-run '^$'), and names a fuzz target of
// the package it runs in; every fuzz target is listed.
func TestReadmeFuzzCommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmdRe := regexp.MustCompile(`go test [^\n` + "`" + `]*-fuzz (\w+)[^\n` + "`" + `]*`)
	listed := map[string]bool{}
	for _, m := range cmdRe.FindAllStringSubmatch(string(readme), -1) {
		line, name := m[0], m[1]
		if !strings.Contains(line, "-fuzztime ") || !strings.Contains(line, "-run '^$'") {
			t.Errorf("README: %q lacks -fuzztime or -run '^$'", line)
		}
		pkg := regexp.MustCompile(`\./[\w/]+`).FindString(line)
		if pkg == "" {
			t.Errorf("README: %q names no package", line)
			continue
		}
		if !hasFuzzTarget(t, filepath.Join("../..", pkg), name) {
			t.Errorf("README: %q: no func %s(f *testing.F) in %s", line, name, pkg)
		}
		listed[name] = true
	}
	// Every fuzz target in the module is in the README.
	filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, m := range regexp.MustCompile(`func (Fuzz\w+)\(f \*testing\.F\)`).FindAllStringSubmatch(string(b), -1) {
			if !listed[m[1]] {
				t.Errorf("%s: %s is not among README's fuzz commands", path, m[1])
			}
		}
		return nil
	})
	if len(listed) == 0 {
		t.Error("README lists no fuzz commands")
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

// TestReadmeListsEveryCommand: README's Commands section gives every
// command's synopsis as help prints it, and its runnable tour (the first
// sh block, which tools/check/readme-check.sh runs) uses every command.
func TestReadmeListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Commands\n")
	if !ok {
		t.Fatal("README has no ## Commands section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, tour, ok := strings.Cut(section, "```sh\n")
	tour, _, ok2 := strings.Cut(tour, "```")
	if !ok || !ok2 {
		t.Fatal("README's Commands section has no sh block")
	}
	flat := strings.Join(strings.Fields(section), " ")
	for _, c := range commands {
		if len(c.subs) > 0 {
			continue
		}
		if syn := strings.Join(strings.Fields(synopsis(c.usage)), " "); !strings.Contains(flat, syn) {
			t.Errorf("README's Commands lack %q", syn)
		}
		if !regexp.MustCompile(`(?m)^\./memunet ` + regexp.QuoteMeta(c.name) + `\b`).MatchString(tour) {
			t.Errorf("README's tour does not run %q", c.name)
		}
	}
}
