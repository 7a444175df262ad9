package archcheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestIntervalsAreMonotonic: no server or client code reads the wall clock
// as nanoseconds (time.Time.UnixNano), the form in which it was kept in
// atomics to time heartbeats, write deadlines, coalescing windows and
// token buckets, where a step of the system clock closes every connection
// or stalls every socket for the step's length. Such code uses
// internal/mono. The load generator (bench) is exempt: it stamps payloads
// that another process reads.
func TestIntervalsAreMonotonic(t *testing.T) {
	root := moduleRoot(t)
	exempt := []string{"bench", "gen", filepath.Join("cmd", "corral-bench")}
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			for _, e := range exempt {
				if rel == e {
					return filepath.SkipDir
				}
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "UnixNano" && len(call.Args) == 0 {
					p := fset.Position(call.Pos())
					found = append(found, rel+":"+strconv.Itoa(p.Line))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("wall-clock nanoseconds read at %s: time intervals with internal/mono.Now instead", strings.Join(found, ", "))
	}
}
