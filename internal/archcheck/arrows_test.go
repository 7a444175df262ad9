package archcheck_test

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/corral-rt/corral/"

// TestArrows compares the non-test imports between the module's packages
// (go list) with the arrow block of docs/ARCHITECTURE.md, both ways: an
// import the page does not allow fails, and so does an arrow nothing uses.
func TestArrows(t *testing.T) {
	root := moduleRoot(t)
	arrows := readArrows(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	imports := listImports(t, root)

	problems := arrowProblems(arrows, imports)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Log("fix the arrow block in docs/ARCHITECTURE.md (or the import), in the same commit")
	}
}

// TestArrowsHoldInsideCore: the packages under core/ are held to their
// arrow lines as the top-level ones are: one that imports another
// without its arrow (core/replay → core/eventlog), or imports core,
// fails.
func TestArrowsHoldInsideCore(t *testing.T) {
	root := moduleRoot(t)
	arrows := readArrows(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	imports := listImports(t, root)
	var under []string
	for pkg := range arrows {
		if strings.HasPrefix(pkg, "core/") {
			under = append(under, pkg)
		}
	}
	if len(under) == 0 {
		t.Fatal("no arrow line for a package under core/")
	}
	for _, c := range []struct{ pkg, bad string }{
		{"core/replay", "core/eventlog"},
		{"core/replay", "core"},
		{"core/room", "core"},
		{"core/room", "core/sessiontable"},
	} {
		imports := maps.Clone(imports)
		imports[c.pkg] = append(slices.Clone(imports[c.pkg]), c.bad)
		want := c.pkg + " → " + c.bad + " is not an arrow of the page"
		if !slices.Contains(arrowProblems(arrows, imports), want) {
			t.Errorf("%s importing %s: no %q", c.pkg, c.bad, want)
		}
	}
	for _, p := range neverArrows(arrows) {
		t.Error(p)
	}
}

// neverArrows are the arrows the page may not hold, whatever imports
// there are: a package under core/ never imports core, which assembles
// them; the room never sees the sessions (core/room knows a member only
// as room.Member: not core/sessiontable, nor a future core/session).
func neverArrows(arrows map[string][]string) []string {
	var problems []string
	for pkg, allowed := range arrows {
		if !strings.HasPrefix(pkg, "core/") {
			continue
		}
		never := []string{"core"}
		if pkg == "core/room" {
			never = append(never, "core/sessiontable", "core/session")
		}
		for _, n := range never {
			if slices.Contains(allowed, n) {
				problems = append(problems, pkg+" → "+n+" is on the page, but "+pkg+" may never import "+n)
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// TestNeverArrowsCaught: neverArrows finds an arrow from core/room to
// core/sessiontable or to core, as someone adding one to the page with
// the import would write it.
func TestNeverArrowsCaught(t *testing.T) {
	root := moduleRoot(t)
	arrows := readArrows(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if _, ok := arrows["core/room"]; !ok {
		t.Fatal("no arrow line for core/room")
	}
	for _, bad := range []string{"core", "core/sessiontable"} {
		arrows := maps.Clone(arrows)
		arrows["core/room"] = append(slices.Clone(arrows["core/room"]), bad)
		want := "core/room → " + bad + " is on the page, but core/room may never import " + bad
		if !slices.Contains(neverArrows(arrows), want) {
			t.Errorf("an arrow core/room → %s: no %q", bad, want)
		}
	}
}

// arrowProblems compares imports with arrows, both ways.
func arrowProblems(arrows, imports map[string][]string) []string {
	var problems []string
	for pkg, deps := range imports {
		allowed, ok := arrows[pkg]
		if !ok {
			problems = append(problems, pkg+" imports "+strings.Join(deps, ", ")+" but has no arrow line")
			continue
		}
		for _, d := range deps {
			if !allows(allowed, d) {
				problems = append(problems, pkg+" → "+d+" is not an arrow of the page")
			}
		}
	}
	for pkg, allowed := range arrows {
		for _, a := range allowed {
			if !slices.ContainsFunc(imports[pkg], func(d string) bool { return allows([]string{a}, d) }) {
				problems = append(problems, pkg+" → "+a+" is on the page but "+pkg+" does not import it")
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// allows says whether an arrow list lets a package import dep; "gen"
// stands for every generated package.
func allows(allowed []string, dep string) bool {
	for _, a := range allowed {
		if a == dep || (a == "gen" && strings.HasPrefix(dep, "gen/")) {
			return true
		}
	}
	return false
}

// readArrows parses the page's first fenced block that holds "→" lines:
// "pkg → a, b, internal/{c,d}, gen".
func readArrows(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arrows := make(map[string][]string)
	in, done := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() && !done {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if in && len(arrows) > 0 {
				done = true
			}
			in = !in
			continue
		}
		from, to, ok := strings.Cut(line, "→")
		if !in || !ok {
			continue
		}
		pkg := strings.TrimSpace(from)
		if _, dup := arrows[pkg]; dup {
			t.Errorf("%s has two arrow lines", pkg)
		}
		arrows[pkg] = expand(to)
	}
	if len(arrows) == 0 {
		t.Fatalf("no arrow block in %s", path)
	}
	return arrows
}

// expand splits "a, internal/{b,c}, gen" into its packages.
func expand(list string) []string {
	var out []string
	for len(list) > 0 {
		var item string
		// A comma inside braces does not end an item.
		depth, i := 0, 0
		for ; i < len(list); i++ {
			switch list[i] {
			case '{':
				depth++
			case '}':
				depth--
			}
			if list[i] == ',' && depth == 0 {
				break
			}
		}
		item, list = strings.TrimSpace(list[:i]), list[min(i+1, len(list)):]
		if item == "" {
			continue
		}
		if open := strings.IndexByte(item, '{'); open >= 0 && strings.HasSuffix(item, "}") {
			for _, part := range strings.Split(item[open+1:len(item)-1], ",") {
				out = append(out, item[:open]+strings.TrimSpace(part))
			}
			continue
		}
		out = append(out, item)
	}
	return out
}

// listImports maps each package of the module (but the generated ones) to
// the module's packages it imports, outside its tests.
func listImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := make(map[string][]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if strings.HasPrefix(pkg, "gen/") {
			continue
		}
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	return imports
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
