package archcheck_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	shellFence = regexp.MustCompile("^\\s*```(sh|bash|console|shell)\\s*$")
	anyFence   = regexp.MustCompile("^\\s*```")
	docMarker  = regexp.MustCompile(`^\s*<!-- (illustrative|tested: (\S+)) -->\s*$`)
)

// TestShellBlocksMarked: every shell block of README.md and docs/*.md
// (```sh, ```bash, ```console, ```shell) is either run by a test or says it
// is not, on the line right above its fence: `<!-- tested: TestName -->`,
// where a func TestName exists in the module's tests (or `<!-- tested:
// e2e/x.test.mjs -->`, a node test that exists), or `<!-- illustrative
// -->`. A reader copies these blocks; one that silently went
// stale (a secret named differently from what the chart reads, a variable
// the page before never exported) is a trap, so each is either proven or
// honestly labelled.
func TestShellBlocksMarked(t *testing.T) {
	root := moduleRoot(t)
	tests := testFuncs(t, root)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, f := range docs {
		rel, _ := filepath.Rel(root, f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prev, inFence := "", false
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case inFence:
				if anyFence.MatchString(line) {
					inFence = false
				}
			case anyFence.MatchString(line):
				inFence = true
				if !shellFence.MatchString(line) {
					break
				}
				m := docMarker.FindStringSubmatch(prev)
				switch {
				case m == nil:
					t.Errorf("%s:%d: shell block without `<!-- illustrative -->` or `<!-- tested: TestName -->` on the line above its fence", rel, n)
				case m[2] == "":
				case strings.HasSuffix(m[2], ".test.mjs"):
					if _, err := os.Stat(filepath.Join(root, m[2])); err != nil {
						t.Errorf("%s:%d: `tested: %s`, but there is no such node test", rel, n, m[2])
					}
				case !tests[m[2]]:
					t.Errorf("%s:%d: `tested: %s`, but no func %s in the module's tests", rel, n, m[2], m[2])
				}
			}
			prev = line
		}
	}
}

// testFuncs returns the names of the Test functions in every _test.go file
// under root (tools/ modules included).
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	names := map[string]bool{}
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
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestShellVariablesSet: a CORRAL_* variable a doc's shell block reads
// ($CORRAL_X) is set by a shell block before it on the same page, or in the
// README, the page every reader starts from. API.md's calls once read
// $CORRAL_API_KEY while the README exported only CORRAL_API_KEYS: copied as
// written, they sent an empty bearer key.
func TestShellVariablesSet(t *testing.T) {
	root := moduleRoot(t)
	// Exported, or assigned on a line of its own: `CORRAL_X=v cmd` sets it
	// for cmd only.
	set := regexp.MustCompile(`(?m)^\s*(?:export\s+(CORRAL_[A-Z0-9_]+)=|(CORRAL_[A-Z0-9_]+)=\S*\s*(?:#.*)?$)`)
	use := regexp.MustCompile(`\$\{?(CORRAL_[A-Z0-9_]+)`)
	readme := map[string]bool{}
	for _, b := range shellBlocks(t, filepath.Join(root, "README.md")) {
		for _, m := range set.FindAllStringSubmatch(b.text, -1) {
			readme[m[1]+m[2]] = true
		}
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, f := range docs {
		rel, _ := filepath.Rel(root, f)
		seen := map[string]bool{}
		for _, b := range shellBlocks(t, f) {
			for _, line := range strings.Split(b.text, "\n") {
				for _, m := range set.FindAllStringSubmatch(line, -1) {
					seen[m[1]+m[2]] = true
				}
			}
			for _, m := range use.FindAllStringSubmatch(b.text, -1) {
				if !seen[m[1]] && !readme[m[1]] {
					t.Errorf("%s:%d: a shell block reads $%s, which no block before it (nor the README) sets", rel, b.line, m[1])
				}
			}
		}
	}
}

type shellBlock struct {
	line int // of the opening fence
	text string
}

func shellBlocks(t *testing.T, path string) []shellBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []shellBlock
	var cur *shellBlock
	inFence := false
	for n, line := range strings.Split(string(b), "\n") {
		switch {
		case inFence:
			if anyFence.MatchString(line) {
				inFence = false
				if cur != nil {
					out = append(out, *cur)
					cur = nil
				}
			} else if cur != nil {
				cur.text += line + "\n"
			}
		case anyFence.MatchString(line):
			inFence = true
			if shellFence.MatchString(line) {
				cur = &shellBlock{line: n + 1}
			}
		}
	}
	return out
}
