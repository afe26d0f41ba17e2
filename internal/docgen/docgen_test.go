package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// TestReferenceUpToDate: docs/reference's generated parts are what the
// code says now: every command's help as memunet help prints it, every
// config key with its default, what it accepts and what it means. A new
// flag, key, default or accepted value fails it until go generate
// ./internal/docgen has written the pages again.
func TestReferenceUpToDate(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what memunet help and the config say (%v): run go generate ./internal/docgen\n%s", rel, err, firstDiff(string(got), string(want)))
		}
	}
	for page, wants := range map[string][]string{
		commandsPage: {"### memunet train\n", "[--resume auto|PATH]", "### memunet data synth\n", "  --size S\n"},
		configPage:   {"| `train.batch_size` | `8` | an integer; ", "| `model.up` | `bilinear` | \"bilinear\" or \"transpose\" | ", "| `memory.allocator` | `arena` | caching or arena | "},
	} {
		for _, w := range wants {
			if !strings.Contains(string(files[page]), w) {
				t.Errorf("%s lacks %q", page, w)
			}
		}
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n  is:        %s\n  should be: %s", i+1, a, b)
		}
	}
	return ""
}

// TestConfigMeaningsCannotDrift: a note for a key the config does not
// have, and a key with neither a note nor a comment in the quickstart,
// stop generation, naming the key.
func TestConfigMeaningsCannotDrift(t *testing.T) {
	notes := read(t, filepath.Join(root, notesFile))
	qs := read(t, filepath.Join(root, quickstart))
	alphaNote := regexp.MustCompile("(?m)^\\| `train\\.alpha` \\|.*\\n")
	alphaComment := regexp.MustCompile(`(?m)^(  alpha: 0\.99) *#.*$`)
	if !alphaNote.MatchString(notes) || !alphaComment.MatchString(qs) {
		t.Fatal("the notes or the quickstart no longer explain train.alpha as this test expects")
	}
	for _, c := range []struct{ name, notes, qs, want string }{
		{"a note for no key", notes + "| `train.nosuch` | gone |\n", qs, "train.nosuch, which is no config key"},
		{"a key without meaning", alphaNote.ReplaceAllString(notes, ""), alphaComment.ReplaceAllString(qs, "$1"), "config key train.alpha has no meaning"},
		{"a note for one key twice", notes + "| `train.lr` | again |\n", qs, "a second row for train.lr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, notesFile), c.notes)
			write(t, filepath.Join(dir, quickstart), c.qs)
			if _, err := configPart(dir); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("configPart: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestCommandNames: the commands are read off the usage lines of memunet
// help, subcommands whole, continuation lines skipped.
func TestCommandNames(t *testing.T) {
	top := "memunet trains.\n\nUsage:\n  memunet train --config FILE [--set k=v]\n      [--out DIR] | memunet\n      compare --runs RUN\n  memunet data check --config FILE\n  memunet config print [NAME]\n  memunet version\n\ntrain    trains\n"
	got := strings.Join(commandNames(top), ",")
	if want := "train,data check,config print,version"; got != want {
		t.Errorf("commandNames = %s, want %s", got, want)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
