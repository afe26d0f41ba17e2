package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is the front door; the rest is under docs/ (docs/development.md:
// The documentation).
const (
	maxReadmeLines = 250
	maxPageLines   = 700
)

// TestReadmeFrontDoor: README.md stays a front door, at most 250 lines,
// and keeps Set up's two commands as written (CI runs the test command
// written there; tools/check/readme-check.sh the rest) and its picture.
func TestReadmeFrontDoor(t *testing.T) {
	readme := read(t, filepath.Join(root, "README.md"))
	if n := strings.Count(readme, "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/", n, maxReadmeLines)
	}
	_, setup, _ := strings.Cut(readme, "\n## Set up\n")
	setup, _, _ = strings.Cut(setup, "\n## ")
	for _, cmd := range []string{"go run ./cmd/memunet train --config configs/quickstart.yaml", "go test ./..."} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(cmd) + `$`).MatchString(setup) {
			t.Errorf("README.md's Set up lacks the line %q", cmd)
		}
	}
	if !strings.Contains(readme, "](docs/img/memory.png)") {
		t.Error("README.md does not show docs/img/memory.png")
	}
}

// TestDocPagesShort: no page under docs/ is over 700 lines.
func TestDocPagesShort(t *testing.T) {
	for _, page := range markdownFiles(t) {
		if !strings.HasPrefix(page, "docs/") {
			continue
		}
		if n := strings.Count(read(t, filepath.Join(root, page)), "\n"); n > maxPageLines {
			t.Errorf("%s has %d lines, more than %d: split it", page, n, maxPageLines)
		}
	}
}

// TestDocLinks: every relative link and image of README.md, docs/ and
// tools/README.md names a file that exists and, with #anchor, a heading of
// that page (as GitHub makes anchors of headings).
func TestDocLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, page := range markdownFiles(t) {
		for _, link := range links(read(t, filepath.Join(root, page))) {
			if regexp.MustCompile(`^[a-z]+:`).MatchString(link) {
				continue // https:, mailto:
			}
			checked++
			target, anchor, _ := strings.Cut(link, "#")
			rel := page
			if target != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(page), target))
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s: link %s: %s does not exist", page, link, rel)
				continue
			}
			if anchor == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			if anchors[rel] == nil {
				anchors[rel] = headingAnchors(read(t, filepath.Join(root, rel)))
			}
			if !anchors[rel][anchor] {
				t.Errorf("%s: link %s: %s has no heading whose anchor is #%s", page, link, rel, anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d links", checked)
	}
}

// markdownFiles are the pages the tests read: README.md, every .md under
// docs/ and tools/README.md, from root, with slashes.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "tools/README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// links are the targets of a page's links and images, outside code.
func links(md string) []string {
	var out []string
	for _, line := range strings.Split(withoutCode(md), "\n") {
		for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// withoutCode is md without its fenced blocks and code spans.
func withoutCode(md string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if fenced {
			b.WriteString("\n")
			continue
		}
		b.WriteString(regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "") + "\n")
	}
	return b.String()
}

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, punctuation dropped, spaces as hyphens, a repeated one numbered.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		text, ok := strings.CutPrefix(line, "#")
		if fenced || !ok {
			continue
		}
		text = strings.TrimSpace(strings.TrimLeft(text, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestHeadingAnchors: anchors as GitHub makes them.
func TestHeadingAnchors(t *testing.T) {
	got := headingAnchors("# Design\n## Allocators: the planned arena\n```\n# not a heading\n```\n## 2026-12-04: `model.conv_algo: auto` by default\n### memunet help\n### memunet help\n")
	for _, want := range []string{"design", "allocators-the-planned-arena", "2026-12-04-modelconv_algo-auto-by-default", "memunet-help", "memunet-help-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block made an anchor")
	}
}
