// Package longfuncs lists the functions of Go packages that are longer
// than a limit (STYLE: functions under ~80 lines), longest first, so a
// clean-up can start with the worst.
package longfuncs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Func is one function and its length in lines, from its signature to its
// closing brace.
type Func struct {
	File  string
	Line  int
	Name  string // Recv.Method or Func
	Lines int
}

func (f Func) String() string { return fmt.Sprintf("%4d  %s:%d  %s", f.Lines, f.File, f.Line, f.Name) }

// Over lists the functions longer than limit lines in the non-test .go
// files of the directories dirs (not below them), longest first.
func Over(limit int, dirs ...string) ([]Func, error) {
	var out []Func
	fset := token.NewFileSet()
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			path := filepath.Join(dir, name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			out = append(out, long(fset, path, f, limit)...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Lines > out[j].Lines })
	return out, nil
}

// long lists the functions of file f longer than limit lines.
func long(fset *token.FileSet, path string, f *ast.File, limit int) []Func {
	var out []Func
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > limit {
			out = append(out, Func{File: path, Line: start, Name: funcName(fn), Lines: n})
		}
	}
	return out
}

// funcName is "Recv.Name" for a method, "Name" for a function.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
