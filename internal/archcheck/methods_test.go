package archcheck_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxMethods is the most methods a named type under core/ may have: a type
// with more gathers several concepts, which belong in packages of their own
// whose arrows TestArrows checks (issue 37).
const maxMethods = 30

// methodDebt lists the types that have more than maxMethods, with the
// count they have: empty since the split of core (issue 37) ended. A
// count may only go down; when a type is at maxMethods or fewer its line
// must go, and no line may be added.
var methodDebt = map[string]int{}

// TestMethodsPerType counts the methods of every named type in the
// packages under core/ (tests left out) and fails for a type with more
// than maxMethods, but for the lines of methodDebt.
func TestMethodsPerType(t *testing.T) {
	root := moduleRoot(t)
	counts := make(map[string]int)
	eachCoreDir(t, root, func(rel, dir string) {
		for name, n := range methodsOf(t, dir) {
			counts[rel+"."+name] = n
		}
	})
	if len(counts) == 0 {
		t.Fatal("no methods found under core/")
	}
	var problems []string
	for typ, n := range counts {
		debt, owed := methodDebt[typ]
		switch {
		case owed && n > debt:
			problems = append(problems, fmt.Sprintf("%s has %d methods, more than the %d methodDebt allows it: move a concept out instead", typ, n, debt))
		case owed && n <= maxMethods:
			problems = append(problems, fmt.Sprintf("%s has %d methods: remove its methodDebt line", typ, n))
		case owed && n < debt:
			problems = append(problems, fmt.Sprintf("%s has %d methods: lower its methodDebt line from %d", typ, n, debt))
		case !owed && n > maxMethods:
			problems = append(problems, fmt.Sprintf("%s has %d methods, more than %d: split it by concept", typ, n, maxMethods))
		}
	}
	for typ := range methodDebt {
		if _, ok := counts[typ]; !ok {
			problems = append(problems, typ+" is gone: remove its methodDebt line")
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// methodsOf counts the methods declared in the non-test Go files of dir,
// by the name of their receiver's type.
func methodsOf(t *testing.T, dir string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	counts := make(map[string]int)
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil {
					counts[receiverName(fn.Recv.List[0].Type)]++
				}
			}
		}
	}
	return counts
}

// receiverName is the name of a receiver's type: T of T, *T, T[K] or *T[K].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

// eachCoreDir calls fn with every directory under root's core/ (testdata
// left out), by its slash path from root and its path on disk.
func eachCoreDir(t *testing.T, root string, fn func(rel, dir string)) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, "core"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		fn(filepath.ToSlash(rel), path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
