package protocol

import (
	"os"
	"strconv"
	"strings"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// TestCodesListed: every code of codes.proto is in the two lists people
// read — the table of docs/CODES.md and the comment on Advice — so that a
// new code cannot land undocumented (4104, 4408 and 4409 once did, in the
// comment).
func TestCodesListed(t *testing.T) {
	table, err := os.ReadFile("../docs/CODES.md")
	if err != nil {
		t.Fatal(err)
	}
	comment, err := os.ReadFile("codes.go")
	if err != nil {
		t.Fatal(err)
	}
	for num, name := range corralv1.Code_name {
		if num == 0 {
			continue
		}
		n := strconv.Itoa(int(num))
		// The row states the advice clients follow: the code's range's
		// (possibly qualified in brackets, as 4004's is).
		row := "| " + n + " | `" + name + "` | " + AdviceOf(corralv1.Code(num)).String()
		if !strings.Contains(string(table), row+" |") && !strings.Contains(string(table), row+" (") {
			t.Errorf("docs/CODES.md has no row starting %q", row)
		}
		if !strings.Contains(string(comment), n+" "+strings.TrimPrefix(name, "CODE_")) {
			t.Errorf("the comment on Advice (protocol/codes.go) does not list %s %s", n, strings.TrimPrefix(name, "CODE_"))
		}
	}
}
