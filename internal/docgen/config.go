package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/memunet/memunet/config"
	"go.yaml.in/yaml/v3"
)

// The generated part of docs/reference/config.md lies between these lines.
const (
	configPage  = "docs/reference/config.md"
	configBegin = "<!-- config keys: generated from package config, internal/docgen/config-notes.md and configs/quickstart.yaml by go generate ./internal/docgen; do not edit -->"
	configEnd   = "<!-- end of config keys -->"
	notesFile   = "internal/docgen/config-notes.md"
	quickstart  = "configs/quickstart.yaml"
)

// key is one entry of the config: a key with a value, or a section (a
// mapping of keys).
type key struct {
	name    string // "train.scaler.enabled"
	section bool
	value   string // the default, in YAML's flow style; "" for a section
}

// configPart is the generated part of config.md: per top-level section, a
// table of its keys with their defaults, what they accept and what they
// mean.
func configPart(root string) (string, error) {
	keys, err := configKeys()
	if err != nil {
		return "", err
	}
	notes, err := readNotes(filepath.Join(root, notesFile))
	if err != nil {
		return "", err
	}
	comments, err := quickstartComments(filepath.Join(root, quickstart))
	if err != nil {
		return "", err
	}
	known := map[string]bool{}
	for _, k := range keys {
		known[k.name] = true
	}
	for name := range notes {
		if !known[name] {
			return "", fmt.Errorf("%s explains %s, which is no config key (config.Default has none): remove its row", notesFile, name)
		}
	}
	meaning := func(name string) string {
		if m, ok := notes[name]; ok {
			return m
		}
		return comments[name]
	}
	var b strings.Builder
	table := func() {
		b.WriteString("| key | default | accepts | meaning |\n|---|---|---|---|\n")
	}
	for _, k := range keys {
		if !strings.Contains(k.name, ".") { // a top-level key or section: its own table
			fmt.Fprintf(&b, "\n## %s\n\n", k.name)
			if m := meaning(k.name); k.section && m != "" {
				b.WriteString(cell(m) + "\n\n")
			}
			table()
			if k.section {
				continue
			}
		}
		m := meaning(k.name)
		switch {
		case k.section && m == "":
			continue
		case k.section:
			fmt.Fprintf(&b, "| `%s` | | a section | %s |\n", k.name, cell(m))
			continue
		case m == "":
			return "", fmt.Errorf("config key %s has no meaning: add a row to %s or a comment to %s", k.name, notesFile, quickstart)
		}
		acc, err := accepts(k)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", k.name, k.value, cell(acc), cell(m))
	}
	return strings.TrimPrefix(b.String(), "\n"), nil
}

// cell is s as the text of a table cell: its pipes escaped (those not
// already), on one line.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return regexp.MustCompile(`(^|[^\\])\|`).ReplaceAllString(s, `$1\|`)
}

// configKeys lists every key and section of config.Default(), in the
// order of its fields, with its default.
func configKeys() ([]key, error) {
	var doc yaml.Node
	if err := doc.Encode(config.Default()); err != nil {
		return nil, err
	}
	var keys []key
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			name, v := n.Content[i].Value, n.Content[i+1]
			if prefix != "" {
				name = prefix + "." + name
			}
			if v.Kind == yaml.MappingNode {
				keys = append(keys, key{name: name, section: true})
				walk(name, v)
				continue
			}
			v.Style = yaml.FlowStyle
			out, err := yaml.Marshal(v)
			if err != nil {
				panic(err) // a node yaml encoded a moment ago
			}
			keys = append(keys, key{name: name, value: strings.TrimSpace(string(out))})
		}
	}
	walk("", &doc)
	if len(keys) < 50 {
		return nil, fmt.Errorf("config.Default() encodes to only %d keys", len(keys))
	}
	return keys, nil
}

// accepts is what key k takes, in the config's own words: its error for a
// value of the wrong kind (and, for a number, for -1, where that names a
// range), else "a string" for a key that takes any.
func accepts(k key) (string, error) {
	what, ok := refusal(k.name, "memunet-docgen-bogus")
	if !ok {
		return "a string", nil
	}
	// "want an integer, e.g. 3": the default is in its own column.
	what = plain(strings.TrimSuffix(what, ", e.g. "+k.value))
	if what != "an integer" && what != "a number" {
		return what, nil
	}
	if rng, ok := refusal(k.name, "-1"); ok {
		what += "; " + plain(rng)
	}
	return what, nil
}

// plain is an error's "want X" or "must be X" as X.
func plain(s string) string {
	for _, p := range []string{"want ", "write ", "must be one of ", "must be "} {
		if r, ok := strings.CutPrefix(s, p); ok {
			return r
		}
	}
	return s
}

// refusal is config.Parse's error for --set name=value, without the file,
// the key and the value it repeats; ok is false where it takes the value,
// or refuses it for another key's sake.
func refusal(name, value string) (string, bool) {
	_, err := config.Parse("x.yaml", nil, []string{name + "=" + value})
	if err == nil {
		return "", false
	}
	msg := strings.TrimPrefix(err.Error(), "x.yaml: ")
	msg = strings.TrimPrefix(msg, "--set: ")
	msg = strings.TrimPrefix(msg, "--set ") // a value --set gave, refused once parsed
	rest, ok := strings.CutPrefix(msg, name+": ")
	if !ok {
		return "", false // the message is another key's (data.path needs data.source)
	}
	for _, p := range []string{`"` + value + `": `, value + ": ", `cannot use "` + value + `": `, `"` + value + `" is not a size: `} {
		if r, ok := strings.CutPrefix(rest, p); ok {
			return r, true
		}
	}
	if strings.Contains(rest, value) {
		return "", false // a message about this value, not about what the key takes
	}
	return rest, true
}

// readNotes reads config-notes.md's table: key -> meaning.
func readNotes(path string) (map[string]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	notes := map[string]string{}
	row := regexp.MustCompile("^\\| `([a-z0-9_.]+)` \\| (.*) \\|$")
	for i, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s:%d: not a row | `key` | meaning |", path, i+1)
		}
		if _, dup := notes[m[1]]; dup {
			return nil, fmt.Errorf("%s:%d: a second row for %s", path, i+1, m[1])
		}
		notes[m[1]] = m[2]
	}
	return notes, nil
}

// quickstartComments maps each key of the commented config to its comment:
// the text after # on its line and on the comment lines below that start
// in the same column.
func quickstartComments(path string) (map[string]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	keyRe := regexp.MustCompile(`^( *)([a-z0-9_]+):(.*)$`)
	var stack []string // the open sections, one per two spaces of indentation
	last, col := "", -1
	for _, line := range strings.Split(string(src), "\n") {
		if m := keyRe.FindStringSubmatch(line); m != nil {
			depth := len(m[1]) / 2
			if depth > len(stack) {
				return nil, fmt.Errorf("%s: %q is indented deeper than a section", path, line)
			}
			stack = append(stack[:depth], m[2])
			last, col = strings.Join(stack, "."), -1
			if i := strings.Index(line, " #"); i >= 0 {
				col = i + 1
				out[last] = strings.TrimSpace(line[col+1:])
			}
			continue
		}
		if i := strings.Index(line, "#"); i >= 0 && i == col && strings.TrimSpace(line[:i]) == "" && last != "" {
			out[last] += " " + strings.TrimSpace(line[i+1:])
			continue
		}
		last, col = "", -1
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no commented keys", path)
	}
	return out, nil
}
