package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// houseRules are the layering rules TestStructure holds the module to.
type houseRules struct {
	// No function of these packages (folders from the module's root,
	// non-test files) spans more than MaxFuncLines lines, from func to
	// its closing brace.
	ShortFuncs   []string
	MaxFuncLines int
	// Plot (an import path and everything below it) is imported only by
	// the package in folder PlotOwner.
	Plot, PlotOwner string
	// Predict's non-test files reach none of Avoided, directly or through
	// the module's other packages.
	Predict string
	Avoided []string
	// CLI holds at most MaxCLILines lines of non-test Go.
	CLI         string
	MaxCLILines int
}

var memunetRules = houseRules{
	ShortFuncs: []string{"rundir", "train", "predict"}, MaxFuncLines: 120,
	Plot: "gonum.org/v1/plot", PlotOwner: "report",
	Predict: "predict", Avoided: []string{"rundir", "train"},
	CLI: "cmd/memunet", MaxCLILines: 1500,
}

// TestStructure: the layers stay as docs/design.md draws them (its "What
// the tests hold the structure to" says so in prose). cmd/memunet is
// the command line only (flags, a call into a package, printing), so that
// a Go caller finds everything it does in a package; charts are report's
// alone; predict loads a checkpoint without the run loop; the run loop,
// the trainer and predict read a screen at a time.
func TestStructure(t *testing.T) {
	for _, v := range memunetRules.violations(t, "../..") {
		t.Error(v)
	}
}

// TestStructureRulesCanFail: a module that breaks each rule once is told
// so, rule by rule, naming the place.
func TestStructureRulesCanFail(t *testing.T) {
	root := t.TempDir()
	long := "package rundir\n\nfunc Long() {\n" + strings.Repeat("\t_ = 1\n", 119) + "}\n\nfunc Short() {\n}\n"
	files := map[string]string{
		"go.mod":                "module example.com/m\n\ngo 1.22\n",
		"rundir/run.go":         long,
		"rundir/run_test.go":    long, // tests may be long
		"train/t.go":            "package train\n",
		"chart/c.go":            "package chart\n\nimport _ \"gonum.org/v1/plot/vg\"\n",
		"report/r.go":           "package report\n\nimport _ \"gonum.org/v1/plot\"\n",
		"predict/p.go":          "package predict\n\nimport _ \"example.com/m/mid\"\n",
		"predict/p_test.go":     "package predict\n\nimport _ \"example.com/m/rundir\"\n",
		"mid/mid.go":            "package mid\n\nimport _ \"example.com/m/train\"\n",
		"cmd/memunet/main.go":   "package main\n" + strings.Repeat("\n", 1500),
		"cmd/memunet/x_test.go": "package main\n" + strings.Repeat("\n", 100),
	}
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := memunetRules.violations(t, root)
	want := []string{
		"rundir/run.go:3: func Long is 121 lines, more than 120",
		"chart/c.go imports gonum.org/v1/plot/vg: only report may",
		"predict reaches train: predict -> mid -> train",
		"cmd/memunet holds 1501 non-test lines, more than 1500",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// violations lists where the module at root breaks r, one line each.
func (r houseRules) violations(t *testing.T, root string) []string {
	t.Helper()
	mod := modulePath(t, root)
	pkgs := goPackages(t, root)
	var out []string
	for _, dir := range r.ShortFuncs {
		for _, f := range pkgs[dir] {
			if f.test {
				continue
			}
			for _, d := range f.ast.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					from, to := f.fset.Position(fd.Pos()), f.fset.Position(fd.End())
					if n := to.Line - from.Line + 1; n > r.MaxFuncLines {
						out = append(out, fmt.Sprintf("%s:%d: func %s is %d lines, more than %d", f.name, from.Line, fd.Name.Name, n, r.MaxFuncLines))
					}
				}
			}
		}
	}
	for _, dir := range sortedKeys(pkgs) {
		for _, f := range pkgs[dir] {
			for _, imp := range f.imports {
				if (imp == r.Plot || strings.HasPrefix(imp, r.Plot+"/")) && dir != r.PlotOwner {
					out = append(out, fmt.Sprintf("%s imports %s: only %s may", f.name, imp, r.PlotOwner))
				}
			}
		}
	}
	for _, avoided := range r.Avoided {
		if chain := importChain(pkgs, mod, r.Predict, avoided); chain != nil {
			out = append(out, fmt.Sprintf("%s reaches %s: %s", r.Predict, avoided, strings.Join(chain, " -> ")))
		}
	}
	lines := 0
	for _, f := range pkgs[r.CLI] {
		if !f.test {
			lines += f.lines
		}
	}
	if lines > r.MaxCLILines {
		out = append(out, fmt.Sprintf("%s holds %d non-test lines, more than %d", r.CLI, lines, r.MaxCLILines))
	}
	return out
}

// goFile is one parsed .go file of the module.
type goFile struct {
	name    string // from the module's root, with slashes
	test    bool
	lines   int
	imports []string
	ast     *ast.File
	fset    *token.FileSet
}

// goPackages parses every .go file below root (build tags ignored: every
// file counts), by folder from root; testdata and hidden folders are not
// packages.
func goPackages(t *testing.T, root string) map[string][]goFile {
	t.Helper()
	pkgs := map[string][]goFile{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipNonPackage(root, p, d)
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		g := goFile{name: filepath.ToSlash(rel), test: strings.HasSuffix(p, "_test.go"), lines: bytes.Count(src, []byte("\n")), ast: f, fset: fset}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			g.imports = append(g.imports, path)
		}
		dir := path.Dir(g.name)
		pkgs[dir] = append(pkgs[dir], g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// skipNonPackage is filepath.SkipDir for a folder below root that holds
// no package of the module (hidden, testdata, node_modules), else nil.
func skipNonPackage(root, path string, d os.DirEntry) error {
	if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
		return filepath.SkipDir
	}
	return nil
}

// importChain is how the package in folder from reaches the one in folder
// to through the module's packages' non-test imports (from, ..., to), or
// nil where it does not.
func importChain(pkgs map[string][]goFile, mod, from, to string) []string {
	via := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if dir == to {
			chain := []string{to}
			for d := via[to]; d != ""; d = via[d] {
				chain = append([]string{d}, chain...)
			}
			return chain
		}
		for _, f := range pkgs[dir] {
			for _, imp := range f.imports {
				next, ok := strings.CutPrefix(imp, mod+"/")
				if _, seen := via[next]; ok && !seen && !f.test {
					via[next] = dir
					queue = append(queue, next)
				}
			}
		}
	}
	return nil
}

// modulePath is the module line of root's go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatalf("%s/go.mod names no module", root)
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
