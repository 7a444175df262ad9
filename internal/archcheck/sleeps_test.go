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

// sleepBudget is how many wall-clock sleeps the repository's test files
// hold: calls of time.Sleep, and receives from time.After standing alone as
// a statement (a sleep by another name), outside the function literals run
// by testing/synctest (synctest.Test, synctest.Run), whose sleeps advance
// the bubble's fake clock and wait on nothing. Before issue 37: 161 (and
// 22 on the fake clock; 183 lines of `grep -rn time.Sleep
// --include=*_test.go`); this after. Lower it when you remove some; never
// raise it.
const sleepBudget = 59

// TestSleepBudget: tests do not wait on the wall clock. A test that waits
// for something to happen waits on the thing (a channel, a hook, a metric,
// or internal/eventually polling a condition with a deadline); one that
// lets time pass for a TTL, a timeout or a backoff runs in a
// testing/synctest bubble or on an injected clock. The number of sleeps
// left may only go down.
func TestSleepBudget(t *testing.T) {
	root := moduleRoot(t)
	perFile := map[string]int{}
	wall, fake := 0, 0
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		w, k := countSleeps(f)
		if w > 0 {
			rel, _ := filepath.Rel(root, path)
			perFile[rel] = w
		}
		wall += w
		fake += k
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d wall-clock sleeps in test files, %d more on synctest's fake clock", wall, fake)
	if wall > sleepBudget {
		files := make([]string, 0, len(perFile))
		for f := range perFile {
			files = append(files, f)
		}
		sort.Slice(files, func(i, j int) bool { return perFile[files[i]] > perFile[files[j]] })
		var b strings.Builder
		for _, f := range files {
			fmt.Fprintf(&b, "\n  %3d %s", perFile[f], f)
		}
		t.Fatalf("%d wall-clock sleeps in test files, over the budget of %d: wait on the event "+
			"(a channel, a hook, a metric, internal/eventually) or let time pass in testing/synctest "+
			"or on an injected clock instead of sleeping:%s", wall, sleepBudget, b.String())
	}
	if wall < sleepBudget {
		t.Logf("under the budget of %d: lower sleepBudget in internal/archcheck/sleeps_test.go", sleepBudget)
	}
}

// countSleeps returns the wall-clock sleeps of f and those inside function
// literals handed to synctest.Test or synctest.Run.
func countSleeps(f *ast.File) (wall, fake int) {
	var bubbles []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || !isCall(call, "synctest", "Test", "Run") {
			return true
		}
		for _, a := range call.Args {
			if lit, ok := a.(*ast.FuncLit); ok {
				bubbles = append(bubbles, lit)
			}
		}
		return true
	})
	count := func(n ast.Node) {
		for _, b := range bubbles {
			if n.Pos() >= b.Pos() && n.End() <= b.End() {
				fake++
				return
			}
		}
		wall++
	}
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CommClause:
			// case <-time.After(d): a select's timeout, not a sleep; its
			// body is looked at.
			for _, s := range n.Body {
				ast.Inspect(s, visit)
			}
			return false
		case *ast.CallExpr:
			if isCall(n, "time", "Sleep") {
				count(n)
			}
		case *ast.ExprStmt:
			// <-time.After(d) as a statement of its own: a sleep by
			// another name
			if u, ok := n.X.(*ast.UnaryExpr); ok && u.Op == token.ARROW {
				if c, ok := u.X.(*ast.CallExpr); ok && isCall(c, "time", "After") {
					count(n)
				}
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	return wall, fake
}

// isCall says whether call is pkg.Name(...) for one of names.
func isCall(call *ast.CallExpr, pkg string, names ...string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok || id.Name != pkg {
		return false
	}
	for _, n := range names {
		if sel.Sel.Name == n {
			return true
		}
	}
	return false
}
