package integration_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/corral-rt/corral/protocol"
)

// TestAPIDocCurl runs docs/API.md's curl calls (the shell blocks marked
// with this test's name) as written against `corral serve` with an
// internal listener — only its address put in for 127.0.0.1:8091 — and
// with CORRAL_API_KEY exported, as the README does. Every call must answer
// a message, not a Connect error, whose fields are ones the doc's answer
// (the `# {...}` lines after the call) shows: a renamed method or field,
// a wrong header or key name fails here.
func TestAPIDocCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed: sudo apt-get install -y curl")
	}
	doc, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^<!-- tested: TestAPIDocCurl -->\n```sh\n(.*?)^```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/API.md has no block marked for TestAPIDocCurl")
	}
	d := start(t, "serve", nil, nil)
	// The doc's Subscribe finds alice on two connections, and its Rooms
	// pages game:* rooms, which a core knows while they have members.
	dial(t, d, "alice", protocol.JSON)
	dial(t, d, "alice", protocol.JSON)
	if out, err := curlJSON(t, d.apiURL, `{"userId":"alice","rooms":["game:1","game:2","game:3"]}`, "Subscribe"); err != nil {
		t.Fatalf("subscribe alice to game:1..3: %v %s", err, out)
	}

	for i, b := range blocks {
		script := strings.ReplaceAll(string(b[1]), "http://127.0.0.1:8091", d.apiURL)
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "CORRAL_API_KEY="+testAPIKey)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("API.md block %d: %v\n%s", i+1, err, stderr.String())
		}
		t.Logf("block %d answered: %s", i+1, out)
		got := jsonValues(t, out)
		want := docAnswers(t, string(b[1]))
		if len(got) != len(want) {
			t.Fatalf("API.md block %d: %d calls answered %d messages, the doc shows %d answers:\n%s", i+1, len(want), len(got), len(want), out)
		}
		for j := range got {
			if m, ok := got[j].(map[string]any); ok && m["code"] != nil {
				t.Errorf("API.md block %d, call %d: a Connect error: %v", i+1, j+1, m)
				continue
			}
			if err := fieldsShown(want[j], got[j], ""); err != nil {
				t.Errorf("API.md block %d, call %d: %v\nanswer: %s", i+1, j+1, err, out)
			}
		}
	}
}

// curlJSON makes one Connect call with curl.
func curlJSON(t *testing.T, base, body, method string) ([]byte, error) {
	t.Helper()
	return exec.Command("curl", "-sS", "-f", base+"/corral.v1.RoomService/"+method,
		"-H", "Authorization: Bearer "+testAPIKey, "-H", "Content-Type: application/json", "-d", body).CombinedOutput()
}

func jsonValues(t *testing.T, b []byte) []any {
	t.Helper()
	var out []any
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not JSON: %v\n%s", err, b)
		}
		out = append(out, v)
	}
}

// docAnswers returns the answers a block shows: each run of `# ` comment
// lines that holds JSON, with "…" kept as a string.
func docAnswers(t *testing.T, block string) []any {
	t.Helper()
	var answers []any
	var cur strings.Builder
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(cur.String()), &v); err != nil {
			t.Fatalf("API.md shows an answer that is not JSON: %v\n%s", err, cur.String())
		}
		answers = append(answers, v)
		cur.Reset()
	}
	for _, l := range strings.Split(block, "\n") {
		if rest, ok := strings.CutPrefix(l, "#"); ok && (cur.Len() > 0 || strings.HasPrefix(strings.TrimSpace(rest), "{")) {
			cur.WriteString(rest)
			continue
		}
		flush()
	}
	flush()
	return answers
}

// fieldsShown fails when got has a field (at any depth) that want, the
// doc's answer, does not show: the doc then describes another message.
// Values are not compared (seqs and epochs vary); a field the doc shows
// may be absent (a zero value is left out of JSON).
func fieldsShown(want, got any, path string) error {
	switch g := got.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return errors.New(path + ": an object, where the doc shows " + typeName(want))
		}
		if len(g) == 0 && len(w) > 0 {
			return errors.New(path + ": an empty answer, where the doc shows fields")
		}
		keys := make([]string, 0, len(g))
		for k := range g {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			wv, shown := w[k]
			if !shown {
				return errors.New(path + "." + k + ": a field the doc's answer does not show")
			}
			if err := fieldsShown(wv, g[k], path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		w, ok := want.([]any)
		if !ok || len(w) == 0 {
			return errors.New(path + ": a list, where the doc shows " + typeName(want))
		}
		for i, x := range g {
			// Each element is compared with the doc's elements: one must
			// show all of its fields.
			var err error
			for _, y := range w {
				if err = fieldsShown(y, x, path+"["+string(rune('0'+i%10))+"]"); err == nil {
					break
				}
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return "a value"
}
