package archcheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// TestLockedStaysHome: under core/, a function, method or interface
// method whose name ends in "Locked" (it needs a lock held) is not
// exported. Each lock guards state declared next to it (issue 37): a
// package whose lock guards some state computes with it itself, and
// another package never calls in under that lock (core/room's growing
// prefixes, once package core's through Room.PositionLocked,
// GrowView.LearnLocked and Catchup.HeldLocked).
func TestLockedStaysHome(t *testing.T) {
	root := moduleRoot(t)
	var problems []string
	eachCoreDir(t, root, func(rel, dir string) {
		for _, name := range exportedLocked(t, dir) {
			problems = append(problems, rel+": "+name+" is exported: a lock's state is its package's own")
		}
	})
	for _, p := range problems {
		t.Error(p)
	}
}

// exportedLocked is the exported names ending in "Locked" that the
// non-test Go files of dir declare: functions, methods and the methods
// of interface types.
func exportedLocked(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	locked := func(id *ast.Ident) bool { return id.IsExported() && strings.HasSuffix(id.Name, "Locked") }
	var out []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.FuncDecl:
					if locked(x.Name) {
						name := x.Name.Name
						if x.Recv != nil {
							name = receiverName(x.Recv.List[0].Type) + "." + name
						}
						out = append(out, name)
					}
				case *ast.TypeSpec:
					if it, ok := x.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							for _, id := range m.Names {
								if locked(id) {
									out = append(out, x.Name.Name+"."+id.Name)
								}
							}
						}
					}
				}
				return true
			})
		}
	}
	return out
}
