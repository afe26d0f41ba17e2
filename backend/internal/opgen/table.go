package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Op is one operation of the table: a method of an interface in
// backend/ops.go and the //op: lines closing its comment.
type Op struct {
	Name     string  // the method, e.g. ReLUMask
	Group    string  // its interface, e.g. Layers
	Params   []Field // as declared: names sharing a type stay together
	Results  []ast.Expr
	Kernels  []string // //op:cuda: the entry points its CUDA method launches
	Threads  string   // //op:cuda threads=: a generated method's threads, in n ("" is n)
	Optional bool     // //op:optional
}

// Field is a run of parameters of one type.
type Field struct {
	Names []string
	Type  ast.Expr
}

// names is every parameter's name, in order.
func (op Op) names() []string {
	var ns []string
	for _, f := range op.Params {
		ns = append(ns, f.Names...)
	}
	return ns
}

// viewsOnly reports an operation whose parameters are all views and which
// returns nothing: the shape of a generated CUDA method.
func (op Op) viewsOnly() bool {
	for _, f := range op.Params {
		if id, ok := f.Type.(*ast.Ident); !ok || id.Name != "View" {
			return false
		}
	}
	return len(op.Results) == 0
}

// parseTable reads the operations from the interfaces of the Go file at
// path, in order.
func parseTable(path string) ([]Op, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var ops []Op
	seen := map[string]bool{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok {
				continue
			}
			for _, m := range it.Methods.List {
				ft, ok := m.Type.(*ast.FuncType)
				if !ok || len(m.Names) != 1 {
					return nil, fmt.Errorf("%s: %s embeds an interface: declare its operations in it", fset.Position(m.Pos()), ts.Name.Name)
				}
				op := Op{Name: m.Names[0].Name, Group: ts.Name.Name}
				if seen[op.Name] {
					return nil, fmt.Errorf("%s: %s is declared twice", fset.Position(m.Pos()), op.Name)
				}
				seen[op.Name] = true
				for _, p := range ft.Params.List {
					fd := Field{Type: p.Type}
					for _, n := range p.Names {
						fd.Names = append(fd.Names, n.Name)
					}
					if len(fd.Names) == 0 {
						return nil, fmt.Errorf("%s: %s: name every parameter", fset.Position(p.Pos()), op.Name)
					}
					op.Params = append(op.Params, fd)
				}
				if ft.Results != nil {
					for _, r := range ft.Results.List {
						for range max(1, len(r.Names)) {
							op.Results = append(op.Results, r.Type)
						}
					}
				}
				if m.Doc != nil {
					for _, c := range m.Doc.List {
						if err := op.directive(c.Text); err != nil {
							return nil, fmt.Errorf("%s: %s: %v", fset.Position(c.Pos()), op.Name, err)
						}
					}
				}
				ops = append(ops, op)
			}
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%s declares no operations", path)
	}
	return ops, nil
}

// directive reads one line of an operation's comment: an //op: line into
// op, any other line is the contract's.
func (op *Op) directive(line string) error {
	rest, ok := strings.CutPrefix(line, "//op:")
	if !ok {
		return nil
	}
	fields := strings.Fields(rest)
	switch {
	case len(fields) == 1 && fields[0] == "optional":
		op.Optional = true
	case len(fields) > 1 && fields[0] == "cuda":
		for _, f := range fields[1:] {
			if t, ok := strings.CutPrefix(f, "threads="); ok {
				op.Threads = t
				continue
			}
			if slices.Contains(op.Kernels, f) {
				return fmt.Errorf("kernel %s named twice", f)
			}
			op.Kernels = append(op.Kernels, f)
		}
		if len(op.Kernels) == 0 {
			return fmt.Errorf("%q names no kernel", line)
		}
	default:
		return fmt.Errorf("%q: want //op:cuda KERNEL... [threads=EXPR] or //op:optional", line)
	}
	return nil
}

// Kernel is an entry point of a kernels/*.cu file.
type Kernel struct {
	Name   string // as in the .cu, e.g. relu_back
	Module string // the file's name without .cu, e.g. ops
	Params []Param
}

// Param is a kernel parameter: its C type (u64, i64 or double) and name.
type Param struct{ Type, Name string }

// GoName is the Kernel constant's name, e.g. KReLUBack.
func (k Kernel) GoName() string { return "K" + camel(k.Name) }

// paramNames is every parameter's name, in order.
func (k Kernel) paramNames() []string {
	var ns []string
	for _, p := range k.Params {
		ns = append(ns, p.Name)
	}
	return ns
}

// initialisms are the words of kernel names that Go spells otherwise than
// capitalized.
var initialisms = map[string]string{"relu": "ReLU", "sgd": "SGD", "rmsprop": "RMSprop"}

// camel is a snake_case name in Go's CamelCase.
func camel(name string) string {
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		if s, ok := initialisms[w]; ok {
			b.WriteString(s)
			continue
		}
		r := []rune(w)
		if len(r) > 0 {
			r[0] = unicode.ToUpper(r[0])
		}
		b.WriteString(string(r))
	}
	return b.String()
}

var kernelDecl = regexp.MustCompile(`(?m)^KERNEL\((\w+)\)\s*\(([^)]*)\)`)

// parseKernels reads the KERNEL(name)(params) entry points of dir/M.cu for
// each module M, in module and then file order.
func parseKernels(dir string, modules []string) ([]Kernel, error) {
	var ks []Kernel
	for _, m := range modules {
		path := filepath.Join(dir, m+".cu")
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		for _, d := range kernelDecl.FindAllStringSubmatch(string(src), -1) {
			k := Kernel{Name: d[1], Module: m}
			for _, p := range strings.Split(d[2], ",") {
				f := strings.Fields(p)
				if len(f) != 2 || (f[0] != "u64" && f[0] != "i64" && f[0] != "double") {
					return nil, fmt.Errorf("%s: kernel %s: parameter %q is not u64, i64 or double NAME (each argument is 64 bits)", path, k.Name, strings.TrimSpace(p))
				}
				k.Params = append(k.Params, Param{Type: f[0], Name: f[1]})
			}
			ks = append(ks, k)
		}
	}
	return ks, nil
}

// handMethods are the methods of type recv declared in the Go files of dir
// other than tests and skip, each with the identifiers its body uses
// (and ".M" for each M it selects from its receiver).
func handMethods(dir, recv, skip string) (map[string]map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	methods := map[string]map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") || filepath.Base(path) == skip {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || receiverName(fd.Recv.List[0].Type) != recv {
				continue
			}
			idents := map[string]bool{}
			self := ""
			if names := fd.Recv.List[0].Names; len(names) == 1 {
				self = names[0].Name
			}
			if fd.Body != nil {
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.Ident:
						idents[n.Name] = true
					case *ast.SelectorExpr:
						if x, ok := n.X.(*ast.Ident); ok && self != "" && x.Name == self {
							idents["."+n.Sel.Name] = true // a method (or field) of the receiver
						}
					}
					return true
				})
			}
			methods[fd.Name.Name] = idents
		}
	}
	return methods, nil
}

// withCallees is methods with each method's identifiers joined by those
// of the methods it calls on its receiver (transitively): what an
// operation launches through a helper method counts as its own.
func withCallees(methods map[string]map[string]bool) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for name := range methods {
		all, todo := map[string]bool{}, []string{name}
		seen := map[string]bool{name: true}
		for len(todo) > 0 {
			m := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for id := range methods[m] {
				all[id] = true
				callee, ok := strings.CutPrefix(id, ".")
				if _, isMethod := methods[callee]; ok && isMethod && !seen[callee] {
					seen[callee] = true
					todo = append(todo, callee)
				}
			}
		}
		out[name] = all
	}
	return out
}

// receiverName is the type a receiver is of, without its pointer.
func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// testCases are the names X of backendtest's case methods testX of *suite.
func testCases(dir, skip string) (map[string]bool, error) {
	ms, err := handMethods(dir, "suite", skip)
	if err != nil {
		return nil, err
	}
	cases := map[string]bool{}
	for m := range ms {
		if name, ok := strings.CutPrefix(m, "test"); ok {
			cases[name] = true
		}
	}
	return cases, nil
}
