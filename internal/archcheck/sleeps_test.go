package archcheck_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sleep is the call counted, spelt so that this file does not count.
const sleep = "time." + "Sleep"

// sleepBudget is how many lines of the repository's test files call
// sleep, as grep -rn with --include=*_test.go counts them: 183 before
// issue 37, this after. Lower it when you remove some; never raise it.
const sleepBudget = 88

// TestSleepBudget: tests do not wait on the wall clock. A test that waits
// for something to happen waits on the thing (a channel, a hook, a metric,
// or internal/eventually polling a condition with a deadline); one that
// lets time pass for a TTL, a timeout or a backoff runs in a
// testing/synctest bubble or on an injected clock. The number of sleeps
// left may only go down.
func TestSleepBudget(t *testing.T) {
	root := moduleRoot(t)
	perFile := map[string]int{}
	total := 0
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
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), sleep) {
				rel, _ := filepath.Rel(root, path)
				perFile[rel]++
				total++
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > sleepBudget {
		files := make([]string, 0, len(perFile))
		for f := range perFile {
			files = append(files, f)
		}
		sort.Slice(files, func(i, j int) bool { return perFile[files[i]] > perFile[files[j]] })
		var b strings.Builder
		for _, f := range files {
			fmt.Fprintf(&b, "\n  %3d %s", perFile[f], f)
		}
		t.Fatalf("%d %s calls in test files, over the budget of %d: wait on the event "+
			"(a channel, a hook, a metric, internal/eventually) or let time pass in testing/synctest "+
			"or on an injected clock instead of sleeping:%s", total, sleep, sleepBudget, b.String())
	}
	if total < sleepBudget {
		t.Logf("%d %s calls, under the budget of %d: lower sleepBudget in internal/archcheck/sleeps_test.go", total, sleep, sleepBudget)
	}
}
