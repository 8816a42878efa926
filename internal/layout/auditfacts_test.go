package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// auditImports are the packages whose importers write audit records.
var auditImports = map[string]bool{
	"github.com/sandboxd/sandboxd/audit":       true,
	"github.com/sandboxd/sandboxd/audit/facts": true,
}

// auditFactsReaders may build maps: package audit writes its own records
// about the log (header, start, stop, rotate, prune: not an exec's facts),
// and sandboxctl reads records and prints them.
var auditFactsReaders = []string{"audit/", "cmd/sandboxctl/"}

// TestAuditFactsAreTyped: a package that writes audit records builds their
// facts as audit/facts structs, never as a map with string keys, so a
// renamed or misspelt fact is a compile error rather than a record that
// `sandboxctl audit verify` refuses in production. It flags every
// map[string]any composite literal in the non-test files of a package one
// of whose files imports the audit packages (a record's facts are often
// built in one file and written through a helper in another).
func TestAuditFactsAreTyped(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	writers := map[string]bool{} // package directories
	walkTracked(t, root, func(rel string, raw []byte) {
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return
		}
		for _, p := range auditFactsReaders {
			if strings.HasPrefix(rel, p) {
				return
			}
		}
		f, err := parser.ParseFile(fset, rel, raw, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		files[rel] = f
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); auditImports[p] {
				writers[path.Dir(rel)] = true
			}
		}
	})
	var found []string
	for rel, f := range files {
		if !writers[path.Dir(rel)] {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok {
				if m, ok := lit.Type.(*ast.MapType); ok && isString(m.Key) && isAny(m.Value) {
					found = append(found, fset.Position(lit.Pos()).String())
				}
			}
			return true
		})
	}
	sort.Strings(found)
	for _, at := range found {
		t.Errorf("%s: a map[string]any literal in a package that writes audit records; build the step's audit/facts struct", at)
	}
}

func isString(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "string"
}

func isAny(e ast.Expr) bool {
	switch v := e.(type) {
	case *ast.Ident:
		return v.Name == "any"
	case *ast.InterfaceType:
		return v.Methods == nil || len(v.Methods.List) == 0
	}
	return false
}
