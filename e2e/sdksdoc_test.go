package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fence matches a fenced code block: its language and its text.
var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")

// TestSDKsDocGoCompiles builds docs/SDKS.md's Go code as written: every
// ```go block is a whole file, named by its first line (// main.go), put
// in a module of its own outside this repository that requires corral
// (replaced by this checkout), then go build and go vet. The TypeScript
// backend is checked by sdksdoc.test.mjs.
func TestSDKsDocGoCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not in -short")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "SDKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := 0
	for _, m := range fence.FindAllStringSubmatch(string(doc), -1) {
		if m[1] != "go" {
			continue
		}
		code := m[2]
		first, _, _ := strings.Cut(code, "\n")
		name, ok := strings.CutPrefix(first, "// ")
		if !ok || !strings.HasSuffix(name, ".go") || strings.ContainsAny(name, " /") {
			t.Errorf("a ```go block in docs/SDKS.md must be a whole file whose first line names it (// main.go); this one starts %q", first)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		files++
	}
	if files == 0 {
		t.Fatal("no ```go block in docs/SDKS.md")
	}
	goVersion := "1.26"
	if mod, err := os.ReadFile(filepath.Join(repo, "go.mod")); err == nil {
		if v := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(mod); v != nil {
			goVersion = string(v[1])
		}
	}
	gomod := "module example.com/backend\n\ngo " + goVersion + "\n\n" +
		"require github.com/corral-rt/corral v0.0.0\n\n" +
		"replace github.com/corral-rt/corral => " + repo + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	// corral's go.sum holds every sum the snippets can need: no download.
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	// -mod=mod adds the requirements the build needs (not those of the
	// dependencies' tests, which tidy would download).
	for _, args := range [][]string{{"build", "-mod=mod", "./..."}, {"vet", "./..."}} {
		cmd := exec.CommandContext(t.Context(), "go", args...) // go test puts GOROOT/bin on PATH
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s on docs/SDKS.md's Go code: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
