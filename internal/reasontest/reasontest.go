// Package reasontest checks a package's drop and refusal reasons against
// their metric and docs/SECURITY.md's "Drop and refusal reasons" table:
// every reason has its series, created at 0, and its row, and neither has
// one the reasons do not. It is for tests; it holds no state.
package reasontest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Doc is the page whose table lists every reason, from the module root.
const Doc = "docs/SECURITY.md"

// row is a line of the table: | `metric` | `reason` | what it counts |.
var row = regexp.MustCompile("^\\| `([a-z_]+)` \\| `([a-z_]+)` \\|")

// Check fails t unless metric, gathered from g before anything was
// counted, has exactly one series at 0 per name of names (its label
// "reason"), and Doc has exactly the rows of names for metric.
func Check(t testing.TB, g prometheus.Gatherer, metric string, names []string) {
	t.Helper()
	want := slices.Sorted(slices.Values(names))
	if i := slices.Index(want, ""); i >= 0 || len(slices.Compact(slices.Clone(want))) != len(want) {
		t.Fatalf("%s: empty or repeated reason in %q", metric, names)
	}

	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []string
	for _, f := range fams {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					series = append(series, l.GetValue())
				}
			}
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s has %v before anything was counted", metric, v)
			}
		}
	}
	slices.Sort(series)
	if !slices.Equal(series, want) {
		t.Errorf("%s series are %q; its reasons are %q (every reason pre-created at 0, no other)", metric, series, want)
	}

	b, err := os.ReadFile(filepath.Join(root(t), Doc))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range regexp.MustCompile("\r?\n").Split(string(b), -1) {
		if m := row.FindStringSubmatch(line); m != nil && m[1] == metric {
			rows = append(rows, m[2])
		}
	}
	slices.Sort(rows)
	if !slices.Equal(rows, want) {
		t.Errorf("%s lists %s reasons %q; its reasons are %q (one row each in \"Drop and refusal reasons\")", Doc, metric, rows, want)
	}
}

// root is the module's directory: the nearest parent with a go.mod.
func root(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("reasontest: no go.mod above the test's directory")
		}
		dir = parent
	}
}
