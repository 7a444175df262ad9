package archcheck_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hopName is a name a flow's step gives in backticks: a package path of
// the module, then a function, type, constant or variable, or a type and
// its method ("core.Core.Publish", "edge.conn.readFrames",
// "core/eventlog.Log.Emit").
var hopName = regexp.MustCompile("`([a-z][a-z0-9]*(?:/[a-z][a-z0-9]*)*)\\.([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?`")

// fileExts are the extensions of the files a flow may name beside its
// hops ("core/room.go", "history/append.lua").
var fileExts = map[string]bool{"go": true, "lua": true, "proto": true, "md": true, "sql": true}

// TestFlowHopsExist reads the flows of docs/ARCHITECTURE.md (the sections
// whose heading starts with "Flow") and fails for a hop that names a
// function, method or type the package does not declare, and for a
// numbered step that names no hop, so that the page's walk through the
// code breaks the tests when the code moves, not the reader.
func TestFlowHopsExist(t *testing.T) {
	root := moduleRoot(t)
	f, err := os.Open(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	decls := make(map[string]map[string]bool) // package path → its names
	declared := func(pkg string) (map[string]bool, bool) {
		if d, ok := decls[pkg]; ok {
			return d, d != nil
		}
		d := namesOf(t, filepath.Join(root, filepath.FromSlash(pkg)))
		decls[pkg] = d
		return d, d != nil
	}

	var flow string
	var step strings.Builder
	steps, hops := 0, 0
	checkStep := func() {
		text := step.String()
		step.Reset()
		if text == "" {
			return
		}
		steps++
		found := false
		for _, m := range hopName.FindAllStringSubmatch(text, -1) {
			pkg, name := m[1], m[2]
			if m[3] != "" {
				name += "." + m[3]
			}
			if ext := m[2]; m[3] == "" && fileExts[ext] {
				// A file's name, such as core/room.go: it must exist.
				file := m[0][1 : len(m[0])-1]
				if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil || fi.IsDir() {
					t.Errorf("%s: %s names a file that is not there", flow, m[0])
				}
				continue
			}
			names, ok := declared(pkg)
			if !ok {
				continue // not a package of the module
			}
			found = true
			hops++
			if !names[name] {
				t.Errorf("%s: %s names %s.%s, which package %s does not declare", flow, m[0], pkg, name, pkg)
			}
		}
		if !found {
			t.Errorf("%s: a step names no hop (`package.Function` or `package.Type.Method`): %.80s", flow, strings.TrimSpace(text))
		}
	}
	numbered := regexp.MustCompile(`^\d+\. `)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			checkStep()
			flow = ""
			if h := strings.TrimLeft(line, "# "); strings.HasPrefix(h, "Flow") {
				flow = h
			}
			continue
		}
		if flow == "" {
			continue
		}
		if numbered.MatchString(line) {
			checkStep()
		}
		if step.Len() > 0 || numbered.MatchString(line) {
			step.WriteString(line)
			step.WriteByte('\n')
		}
	}
	checkStep()
	if steps == 0 || hops == 0 {
		t.Fatalf("no flow steps with hops in docs/ARCHITECTURE.md (%d steps, %d hops)", steps, hops)
	}
}

// namesOf returns what the non-test Go files of dir declare at the top
// level: functions, types, constants and variables by name, methods (and
// the methods of interfaces) as "Type.Method"; nil when dir holds no Go
// package.
func namesOf(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	if err != nil || len(pkgs) == 0 {
		return nil
	}
	names := make(map[string]bool)
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						names[d.Name.Name] = true
					} else {
						names[receiverName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							names[s.Name.Name] = true
							if it, ok := s.Type.(*ast.InterfaceType); ok {
								for _, m := range it.Methods.List {
									for _, n := range m.Names {
										names[s.Name.Name+"."+n.Name] = true
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}
