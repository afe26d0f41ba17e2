package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocFileLists holds every package's doc.go to the files it names: a
// file it names exists (a bare name in the package's folder, a path from
// the module's root), and a doc.go with a file list (a paragraph starting
// "Files") names every non-test, non-generated .go file of its package, so
// the list cannot drift as files come and go.
func TestDocFileLists(t *testing.T) {
	root := "../.."
	nameRe := regexp.MustCompile(`[\w./-]*\w\.(?:go|cu|cpp|h|s|ptx|fatbin)\b`)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipNonPackage(root, path, d)
		}
		if d.Name() != "doc.go" {
			return nil
		}
		checked++
		dir := filepath.Dir(path)
		rel, _ := filepath.Rel(root, path)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		comment := packageComment(src)
		for _, name := range nameRe.FindAllString(comment, -1) {
			where := filepath.Join(dir, name)
			if strings.Contains(name, "/") {
				where = filepath.Join(root, name)
			}
			if _, err := os.Stat(where); err != nil {
				t.Errorf("%s names %s, which does not exist", rel, name)
			}
		}
		list := fileListParagraph(comment)
		if list == "" {
			return nil
		}
		named := nameRe.FindAllString(list, -1)
		for _, f := range packageFiles(t, dir) {
			if !slices.Contains(named, f) {
				t.Errorf("%s: its file list lacks %s", rel, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("found only %d doc.go files", checked)
	}
}

// packageComment is doc.go's comment lines, without the slashes.
func packageComment(src []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(src), "\n") {
		if text, ok := strings.CutPrefix(line, "//"); ok && !strings.HasPrefix(text, "go:") {
			b.WriteString(strings.TrimPrefix(text, " "))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// fileListParagraph is the comment's paragraph that starts with "Files",
// or "".
func fileListParagraph(comment string) string {
	for _, p := range strings.Split(comment, "\n\n") {
		if strings.HasPrefix(strings.TrimSpace(p), "Files") {
			return p
		}
	}
	return ""
}

// packageFiles is dir's .go files a file list must name: not tests, not
// doc.go, not generated ("Code generated ... DO NOT EDIT.").
func packageFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var out []string
	for _, p := range paths {
		name := filepath.Base(p)
		if strings.HasSuffix(name, "_test.go") || name == "doc.go" {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`).Match(src) || bytes.Contains(src, []byte("\n//go:build ignore")) || bytes.HasPrefix(src, []byte("//go:build ignore")) {
			continue
		}
		out = append(out, name)
	}
	return out
}
