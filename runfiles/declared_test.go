package runfiles

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkedNames are the names TestNamesDeclaredOnce looks for: every name
// here but Best, Eval, Predict and ExportStem, which are also words of
// the command line ("eval", "predict" as commands, "best" as a checkpoint
// save's reason) and cannot be told from them in a literal.
var checkedNames = []string{Config, Metrics, Summary, Curves, Timeline, Checkpoints, TensorBoard,
	Manifest, ManifestSum, Model, Optimizer, PredictReport, Legend, CompareCSV, CompareJSON,
	MemoryChart, TimelineChart, ValCurves, CrossValidation, "step-%08d", "-step-"}

// wordsAlike are literals that spell a name and mean something else, by
// file: memory.offload's value "checkpoints" is not the folder.
var wordsAlike = map[string]string{"config/variant.go": `"checkpoints"`}

// TestNamesDeclaredOnce: no non-test Go file of the module outside this
// package spells a run file's name as a string literal (the name itself,
// a path that ends or starts with it, a format string of a step's name);
// they take it from here.
func TestNamesDeclaredOnce(t *testing.T) {
	for _, v := range literalViolations(t, "..", checkedNames) {
		file, _, _ := strings.Cut(v, ":")
		if lit, ok := wordsAlike[file]; ok && strings.Contains(v, ": "+lit+" spells") {
			continue
		}
		t.Error(v)
	}
}

// TestNamesDeclaredOnceCanFail: a module that spells names is told so,
// file and line; comments, struct tags, tests and this package are not.
func TestNamesDeclaredOnceCanFail(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"a/a.go":               "package a\n\n// writes metrics.jsonl\nconst f = \"metrics.jsonl\"\n\ntype T struct {\n\tX int `json:\"summary.json\"`\n}\n",
		"b/b.go":               "package b\n\nimport \"path/filepath\"\n\nvar p = filepath.Join(\"x\", \"checkpoints/step-1\")\nvar q = \"run/summary.json\"\nvar ok = \"a summary.json line, a-step-N name\"\nvar f = \"%s-step-%d\"\n",
		"b/b_test.go":          "package b\n\nconst f = \"metrics.jsonl\"\n",
		"runfiles/runfiles.go": "package runfiles\n\nconst Metrics = \"metrics.jsonl\"\n",
		"testdata/x/x.go":      "package x\n\nconst f = \"metrics.jsonl\"\n",
	}
	for name, src := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := literalViolations(t, root, []string{"metrics.jsonl", "summary.json", "checkpoints", "-step-"})
	want := []string{
		`a/a.go:4: "metrics.jsonl" spells runfiles' "metrics.jsonl"`,
		`b/b.go:5: "checkpoints/step-1" spells runfiles' "checkpoints"`,
		`b/b.go:6: "run/summary.json" spells runfiles' "summary.json"`,
		`b/b.go:8: "%s-step-%d" spells runfiles' "-step-"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// literalViolations lists, one line each, the string literals of the
// non-test Go files below root (but runfiles/, testdata and hidden
// folders) that are one of names, or a path ending or starting with one.
func literalViolations(t *testing.T, root string, names []string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || rel == "runfiles") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		tags := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if fld, ok := n.(*ast.Field); ok && fld.Tag != nil {
				tags[fld.Tag] = true
			}
			return true
		})
		for _, imp := range f.Imports {
			tags[imp.Path] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || tags[lit] {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, name := range names {
				pattern := strings.HasPrefix(name, "-") || strings.Contains(name, "%")
				if pattern && strings.Contains(s, name) && strings.Contains(s, "%") ||
					!pattern && (s == name || strings.HasSuffix(s, "/"+name) || strings.HasPrefix(s, name+"/")) {
					out = append(out, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+": "+lit.Value+" spells runfiles' "+strconv.Quote(name))
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
