// Command docgen writes the generated parts of docs/reference from the
// code, so that the reference cannot say what memunet does not do:
//
//   - docs/reference/help.md: every command's help as "memunet help"
//     prints it (synopsis, what it does, every flag with its default),
//     from a memunet built from this tree;
//   - docs/reference/config.md: every config key (config.Default, section
//     by section) with its default, what it accepts in the config's own
//     words (config.Parse's error for a value of the wrong kind) and its
//     meaning (config-notes.md, else the key's comment in
//     configs/quickstart.yaml).
//
// Each page is hand-written around its generated part, which lies between
// two marker lines; docgen rewrites only that part, and only files whose
// contents change. go generate ./internal/docgen (or ./...) runs it.
// TestReferenceUpToDate fails when a page differs from what docgen would
// write, so a new flag, key, default or accepted value shows up as a
// failing test until the reference is generated again.
//
// Why run the binary rather than import the help tables: they belong to
// package main of cmd/memunet, which holds the command line only, and
// what a user reads is what "memunet help" prints; building it costs a
// link, since go test ./... has compiled its packages.
package main

//go:generate go run .

import (
	"os"
	"path/filepath"

	"github.com/memunet/memunet/internal/genfiles"
)

func main() { genfiles.Main("docgen", Generate) }

// Generate returns what the generated pages (paths from root, with
// slashes) hold once their generated parts are written.
func Generate(root string) (map[string][]byte, error) {
	commands, err := commandsPart(root)
	if err != nil {
		return nil, err
	}
	keys, err := configPart(root)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, p := range []struct{ rel, begin, end, text string }{
		{commandsPage, commandsBegin, commandsEnd, commands},
		{configPage, configBegin, configEnd, keys},
	} {
		b, err := replace(root, p.rel, p.begin, p.end, p.text)
		if err != nil {
			return nil, err
		}
		files[p.rel] = b
	}
	return files, nil
}

// replace is file rel (from root) with the part from the line begin to
// the line end, both included, replaced by begin, text and end.
func replace(root, rel, begin, end, text string) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	return genfiles.Splice(rel, src, begin, end, begin+"\n\n"+text+"\n"+end)
}
