package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestConfigDocCommands runs, as written from the repository's root, every
// `corral ...` line of docs/CONFIG.md's shell blocks marked
// `<!-- tested: TestConfigDocCommands -->` (check-config of the example
// file), in this process: each must succeed and print no error.
func TestConfigDocCommands(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^<!-- tested: TestConfigDocCommands -->\n```sh\n(.*?)^```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/CONFIG.md has no block marked for TestConfigDocCommands")
	}
	t.Chdir("../..")
	ran := 0
	for _, b := range blocks {
		for _, line := range strings.Split(string(b[1]), "\n") {
			line, _, _ = strings.Cut(line, "#")
			args := strings.Fields(line)
			if len(args) == 0 {
				continue
			}
			if len(args) < 2 || args[0] != "corral" || args[1] != "check-config" {
				t.Fatalf("docs/CONFIG.md: the test runs only `corral check-config` lines, not %q", line)
			}
			var out, errs bytes.Buffer
			if err := checkConfig(args[2:], &out, &errs); err != nil || errs.Len() > 0 {
				t.Errorf("%s: %v\n%s", strings.TrimSpace(line), err, errs.String())
			}
			t.Logf("%s: %s", strings.TrimSpace(line), strings.TrimSpace(out.String()))
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no command ran")
	}
}
