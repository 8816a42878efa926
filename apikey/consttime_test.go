package apikey

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A timing test cannot see a comparison that stops at the first wrong
// byte: over a network round trip of tens of microseconds, the few
// nanoseconds it saves are noise. So the rule is checked in the source
// instead: in the code that handles keys and presented tokens, a secret is
// compared only by subtle.ConstantTimeCompare or hmac.Equal, never with
// ==, != or switch, nor with bytes.Equal, bytes.Compare, strings.Compare,
// strings.EqualFold, slices.Equal or reflect.DeepEqual.

// keyFiles are the files that handle keys or presented tokens, relative to
// this package.
var keyFiles = []string{"apikey.go", "../supervisor/auth.go"}

// secretName matches the identifiers and fields that hold a key, its HMAC
// or a presented token.
var secretName = regexp.MustCompile(`(?i)(key|mac|tok|secret|presented|^got$|bearer)`)

// variableTimeFuncs compare byte by byte and may stop early.
var variableTimeFuncs = map[string]bool{
	"bytes.Equal": true, "bytes.Compare": true, "strings.Compare": true, "strings.EqualFold": true,
	"slices.Equal": true, "slices.Compare": true, "reflect.DeepEqual": true,
}

// TestKeyComparisonsConstantTime fails on any variable-time comparison of a
// secret in keyFiles, and when Match no longer calls
// subtle.ConstantTimeCompare.
func TestKeyComparisonsConstantTime(t *testing.T) {
	for _, f := range keyFiles {
		for _, v := range variableTimeCompares(t, f) {
			t.Errorf("%s: a secret compared in variable time; use subtle.ConstantTimeCompare (or hmac.Equal)", v)
		}
	}
	if !callsIn(t, "apikey.go", "Match", "subtle.ConstantTimeCompare") {
		t.Error("Set.Match does not call subtle.ConstantTimeCompare")
	}
}

// TestVariableTimeComparesFindsEarlyExits: the checker itself sees each
// forbidden form and passes the allowed ones.
func TestVariableTimeComparesFindsEarlyExits(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{`if got == s.keys[i].mac { found = i }`, 1},
		{`if bytes.Equal(got[:], k.mac[:]) { found = i }`, 1},
		{`if presented != want { return }`, 1},
		{`switch tok { case "x": }`, 1},
		{`if strings.EqualFold(tok, k.Name) {}`, 1},
		{`if subtle.ConstantTimeCompare(got[:], k.mac[:]) == 1 { found = i }`, 0},
		{`if hmac.Equal(got[:], k.mac[:]) {}`, 0},
		{`if tok == "" || auth.Keys == nil || len(key) < MinKeyLen {}`, 0},
		{`if strings.EqualFold(scheme, "Bearer") {}`, 0},
	} {
		src := "package p\nconst MinKeyLen = 32\nfunc f() {\n" + tc.src + "\n}\n"
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, "x.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if got := len(checkFile(fset, file)); got != tc.want {
			t.Errorf("%s: %d findings; want %d", tc.src, got, tc.want)
		}
	}
}

func parseKeyFile(t *testing.T, name string) (*token.FileSet, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.FromSlash(name), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fset, f
}

func variableTimeCompares(t *testing.T, name string) []string {
	t.Helper()
	fset, f := parseKeyFile(t, name)
	return checkFile(fset, f)
}

// checkFile returns the positions of the variable-time comparisons of a
// secret in f.
func checkFile(fset *token.FileSet, f *ast.File) []string {
	consts := map[string]bool{"nil": true, "true": true, "false": true}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					consts[n.Name] = true
				}
			}
		}
	}
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), what))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && !isConst(n.X, consts) && !isConst(n.Y, consts) &&
				(mentionsSecret(n.X) || mentionsSecret(n.Y)) {
				report(n, n.Op.String())
			}
		case *ast.SwitchStmt:
			if n.Tag != nil && mentionsSecret(n.Tag) {
				report(n, "switch")
			}
		case *ast.CallExpr:
			if name := calleeName(n); variableTimeFuncs[name] {
				for _, a := range n.Args {
					if mentionsSecret(a) {
						report(n, name)
						break
					}
				}
			}
		}
		return true
	})
	return out
}

// isConst reports whether e is a literal or a named constant of the file.
func isConst(e ast.Expr, consts map[string]bool) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return consts[e.Name]
	case *ast.SelectorExpr: // a constant of another package: pkg.Name
		x, ok := e.X.(*ast.Ident)
		return ok && ast.IsExported(e.Sel.Name) && strings.ToLower(x.Name[:1]) == x.Name[:1] && !secretName.MatchString(e.Sel.Name)
	}
	return false
}

// mentionsSecret reports whether an identifier or field named like a
// secret appears in e (a length of one, len(key), is not the secret).
func mentionsSecret(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "len" || id.Name == "cap") {
				return false
			}
		case *ast.Ident:
			if secretName.MatchString(n.Name) {
				found = true
			}
		}
		return !found
	})
	return found
}

func calleeName(c *ast.CallExpr) string {
	if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok {
			return x.Name + "." + sel.Sel.Name
		}
	}
	return ""
}

// callsIn reports whether the function or method fn of file name calls
// callee.
func callsIn(t *testing.T, name, fn, callee string) bool {
	t.Helper()
	_, f := parseKeyFile(t, name)
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && calleeName(c) == callee {
				found = true
			}
			return !found
		})
	}
	return found
}
