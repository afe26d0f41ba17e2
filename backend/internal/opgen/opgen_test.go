package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../../.."

// TestGeneratedFilesMatchTable: every file go generate ./backend writes is
// what the table (backend/ops.go), the kernels and the backends make of it
// now.
func TestGeneratedFilesMatchTable(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what backend/ops.go makes of it (%v): run go generate ./backend", rel, err)
		}
	}
}

// edit replaces old by new in file, or appends new where old is empty.
type edit struct{ file, old, new string }

// copyRepo copies what Generate reads into a temporary directory and
// applies the edits, in order.
func copyRepo(t *testing.T, edits ...edit) string {
	t.Helper()
	dst := t.TempDir()
	for _, dir := range []string{"backend", "backend/cpu", "backend/noop", "backend/cuda", "backend/cuda/kernels", "backend/backendtest"} {
		if err := os.MkdirAll(filepath.Join(dst, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, pat := range []string{"*.go", "*.cu"} {
			paths, _ := filepath.Glob(filepath.Join(root, dir, pat))
			for _, p := range paths {
				copyFile(t, p, filepath.Join(dst, dir, filepath.Base(p)))
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dst, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(root, "docs", "design.md"), filepath.Join(dst, "docs", "design.md"))
	for _, e := range edits {
		p := filepath.Join(dst, filepath.FromSlash(e.file))
		b, err := os.ReadFile(p)
		if err != nil && e.old != "" {
			t.Fatal(err)
		}
		s := string(b)
		if e.old == "" {
			s += e.new
		} else if !strings.Contains(s, e.old) {
			t.Fatalf("%s has no %q to edit", e.file, e.old)
		} else {
			s = strings.Replace(s, e.old, e.new, 1)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Twice is an operation no backend has: its declaration (optional or
// required), composition and case.
var (
	twiceOptional = edit{"backend/ops.go", "\tAdd(out, x, y View)\n", "\tAdd(out, x, y View)\n\t// Twice: out = in + in.\n\t//\n\t//op:optional\n\tTwice(out, in View)\n"}
	twiceRequired = edit{"backend/ops.go", "\tAdd(out, x, y View)\n", "\tAdd(out, x, y View)\n\t// Twice: out = in + in.\n\tTwice(out, in View)\n"}
	twiceComposed = edit{"backend/twice.go", "", "package backend\n\nfunc (c Composed) Twice(out, in View) { c.Add(out, in, in) }\n"}
	twiceCase     = edit{"backend/backendtest/twice.go", "", "package backendtest\n\nimport \"testing\"\n\nfunc (s *suite) testTwice(t *testing.T) {}\n"}
)

// TestOptionalOperationComposed: an optional operation that neither the
// CPU nor the CUDA backend has gets their composed methods, Supports false,
// a no-op planner method and a second case on its composition.
func TestOptionalOperationComposed(t *testing.T) {
	files, err := Generate(copyRepo(t, twiceOptional, twiceComposed, twiceCase))
	if err != nil {
		t.Fatal(err)
	}
	for rel, wants := range map[string][]string{
		"backend/ops_gen.go":             {"MethodTwice", caseOf("MethodTwice") + "return true"},
		"backend/cpu/ops_gen.go":         {caseOf("backend.MethodTwice") + "return false", "func (c CPU) Twice(out, in backend.View) {\n\tbackend.Composed{Backend: c}.Twice(out, in)"},
		"backend/cuda/ops_gen.go":        {caseOf("backend.MethodTwice") + "return false", "func (b *Backend) Twice(out, in backend.View) {\n\tbackend.Composed{Backend: b}.Twice(out, in)"},
		"backend/noop/ops_gen.go":        {"func (Noop) Twice(_, _ backend.View)"},
		"backend/backendtest/ops_gen.go": {`t.Run("Twice", s.testTwice)`, `t.Run("Composed/Twice", composed.testTwice)`},
		"docs/design.md":                 {"| Layers | `Twice` (optional) | none yet: `backend.Composed`'s composition |"},
		"backend/doc.go":                 {"Twice (optional)"},
	} {
		for _, w := range wants {
			re, isRE := strings.CutPrefix(w, "re:")
			if isRE && !regexp.MustCompile(re).Match(files[rel]) || !isRE && !strings.Contains(string(files[rel]), w) {
				t.Errorf("%s lacks %q:\n%s", rel, w, files[rel])
			}
		}
	}
}

// caseOf is a want ("re:" and a regexp) for a switch case that lists
// method, among others or alone, up to its body's indentation.
func caseOf(method string) string {
	return `re:case (\S+, )*` + regexp.QuoteMeta(method) + `(, \S+)*:\n\t\t`
}

// TestTableErrors: a table that disagrees with the kernels, the backends or
// backendtest stops go generate with an error naming what to fix.
func TestTableErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		edits []edit
		want  string
	}{
		{"unnamed kernel", []edit{{"backend/cuda/kernels/ops.cu", "", "\nKERNEL(orphan)(u64 out, i64 n) {}\n"}},
			"kernel orphan is not named by any operation"},
		{"missing kernel", []edit{{"backend/ops.go", "//op:cuda relu\n", "//op:cuda relu nosuch\n"}},
			"names kernel nosuch, which no KERNEL(nosuch)"},
		{"unknown directive", []edit{{"backend/ops.go", "//op:cuda relu\n", "//op:cude relu\n"}},
			`"//op:cude relu": want //op:cuda`},
		{"kernel launched but not named", []edit{{"backend/ops.go", "conv_back_weight split_sum norm_sums add_sums tc_", "conv_back_weight split_sum norm_sums tc_"}},
			"ConvBack launches add_sums, which its //op:cuda line"},
		{"optional without composition", []edit{twiceOptional, twiceCase},
			"write its composition of required operations, func (c Composed) Twice"},
		{"required with composition", []edit{twiceRequired, twiceComposed, twiceCase},
			"Twice is required, so Composed must not compose it"},
		{"required without a CPU method", []edit{twiceRequired, twiceCase},
			"backend/cpu has no Twice"},
		{"no case", []edit{twiceOptional, twiceComposed},
			"backend/backendtest has no case for Twice"},
		{"kernel that does not fit", []edit{twiceOptional, twiceComposed, twiceCase,
			{"backend/ops.go", "//op:optional\n\tTwice", "//op:optional\n\t//op:cuda twice\n\tTwice"},
			{"backend/cuda/kernels/ops.cu", "", "\nKERNEL(twice)(u64 out, u64 in, i64 scale, i64 n) {}\n"}},
			"backend/cuda has no Twice and cannot generate it (twice(out, in, scale, n) does not take Twice's views"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Generate(copyRepo(t, c.edits...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
