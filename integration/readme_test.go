package integration_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// readmeTry returns the steps of the README's "Try it in one minute": each
// is the frames of a `<!-- try:send -->` block and the frames of the
// `<!-- try:expect -->` block after it.
func readmeTry(t *testing.T) (steps [][2][]string) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Try it in one minute")
	if i < 0 {
		t.Fatal(`README.md has no "## Try it in one minute"`)
	}
	s = s[i+3:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	block := func(marker string) ([]string, bool) {
		k := strings.Index(s, marker)
		if k < 0 {
			return nil, false
		}
		s = s[k:]
		open := strings.Index(s, "```json\n")
		end := strings.Index(s[open+8:], "```")
		if open < 0 || end < 0 {
			t.Fatalf("README.md: %s without a ```json block", marker)
		}
		body := s[open+8 : open+8+end]
		s = s[open+8+end+3:]
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		return lines, true
	}
	for {
		send, ok := block("<!-- try:send")
		if !ok {
			break
		}
		expect, ok := block("<!-- try:expect")
		if !ok {
			t.Fatal("README.md: a try:send block without its try:expect block")
		}
		steps = append(steps, [2][]string{send, expect})
	}
	if len(steps) == 0 {
		t.Fatal("README.md: no try:send blocks")
	}
	return steps
}

// matches reports whether got has everything want has: the same values,
// objects may have more fields, and the string "…" stands for any value.
func matches(want, got any) bool {
	switch w := want.(type) {
	case string:
		if w == "…" {
			return got != nil
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !matches(v, g[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}

// TestReadmeTry runs the README's one-minute try, as written, against a
// `corral serve --insecure-dev` in this process: a raw WebSocket client
// sends each try:send block and must receive exactly the try:expect
// block's frames, in order (batches flattened). Then it checks the
// README's word on resuming: without acks a resume replays from the start
// of the history, after an ack from the acknowledged seq.
func TestReadmeTry(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	ws := rawDial(t, d, "corral.v1.json")
	var pending []map[string]any // frames read, not yet matched
	sawBatch := false
	next := func(ws *websocket.Conn) map[string]any {
		t.Helper()
		for len(pending) == 0 {
			_, data, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			var f map[string]any
			if err := json.Unmarshal(data, &f); err != nil {
				t.Fatalf("server frame %q: %v", data, err)
			}
			if b, ok := f["batch"].(map[string]any); ok {
				// The README's word on batches: the wrapper is the whole
				// message, it holds only frames, never a batch.
				frames, _ := b["frames"].([]any)
				if len(f) != 1 || len(b) != 1 || len(frames) == 0 {
					t.Fatalf("a batch is not {\"batch\":{\"frames\":[...]}} as the README says: %s", data)
				}
				for _, x := range frames {
					x := x.(map[string]any)
					if _, nested := x["batch"]; nested {
						t.Fatalf("a batch inside a batch: %s", data)
					}
					pending = append(pending, x)
				}
				sawBatch = true
				continue
			}
			pending = append(pending, f)
		}
		f := pending[0]
		pending = pending[1:]
		return f
	}
	var welcome map[string]any
	for _, step := range readmeTry(t) {
		for _, line := range step[0] {
			if !json.Valid([]byte(line)) {
				t.Fatalf("README sends invalid JSON: %s", line)
			}
			if err := ws.Write(ctx, websocket.MessageText, []byte(line)); err != nil {
				t.Fatal(err)
			}
		}
		for _, line := range step[1] {
			var want any
			if err := json.Unmarshal([]byte(line), &want); err != nil {
				t.Fatalf("README expects invalid JSON %s: %v", line, err)
			}
			got := next(ws)
			if !matches(want, got) {
				b, _ := json.Marshal(got)
				t.Fatalf("README says the server answers\n\t%s\nit answered\n\t%s", line, b)
			}
			if w, ok := got["welcome"].(map[string]any); ok {
				welcome = w
			}
		}
	}
	if welcome == nil {
		t.Fatal("the README's try has no welcome")
	}
	checkReadmeWire(t, readmeTry(t)[0][1])
	t.Logf("a batch arrived during the try: %v", sawBatch)

	// Resume without acks: the message of the try comes again.
	resume := func(tail string) *websocket.Conn {
		ws.CloseNow()
		ws = rawDial(t, d, "corral.v1.json")
		pending = nil
		hello := fmt.Sprintf(`{"hello":{"token":"alice","resume":{"sessionId":%q,"resumeToken":%q}}}`, welcome["sessionId"], welcome["resumeToken"])
		for _, f := range []string{hello, tail} {
			if f == "" {
				continue
			}
			if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
				t.Fatal(err)
			}
		}
		return ws
	}
	want := func(ws *websocket.Conn, kind string, fields map[string]any) {
		t.Helper()
		got := next(ws)
		if !matches(map[string]any{kind: fields}, got) {
			b, _ := json.Marshal(got)
			t.Fatalf("want %s %v, got %s", kind, fields, b)
		}
	}
	ws = resume("")
	want(ws, "welcome", map[string]any{"resumed": true})
	want(ws, "joined", map[string]any{"room": "lobby"})
	want(ws, "message", map[string]any{"room": "lobby", "seq": 1.0})
	want(ws, "replayEnd", map[string]any{"room": "lobby", "seq": 1.0})
	// Acknowledged: a resume replays nothing before seq 2.
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"ack":{"room":"lobby","seq":1}}`)); err != nil {
		t.Fatal(err)
	}
	// The edge has read the ack once the ping after it is answered; it
	// reaches the core before this connection's detach (one link, in
	// order), so the next resume sees it.
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"ping":{"id":2}}`)); err != nil {
		t.Fatal(err)
	}
	want(ws, "pong", map[string]any{"id": 2.0})
	ws = resume(`{"publish":{"room":"lobby","id":"2","payload":2}}`)
	want(ws, "welcome", map[string]any{"resumed": true})
	want(ws, "joined", map[string]any{"room": "lobby"})
	want(ws, "message", map[string]any{"room": "lobby", "seq": 2.0})
}

// checkReadmeWire checks the README's example of a batch (the try:wire
// block): one JSON value {"batch":{"frames":[...]}} whose frames are the
// last frames of the try's first expect block, in order — what a raw client
// receives when they are written together.
func checkReadmeWire(t *testing.T, expect []string) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	k := strings.Index(s, "<!-- try:wire -->\n```json\n")
	if k < 0 {
		t.Fatal("README.md: the try shows no batch as a raw client receives it (a <!-- try:wire --> ```json block)")
	}
	s = s[k+len("<!-- try:wire -->\n```json\n"):]
	s = s[:strings.Index(s, "```")]
	var wire struct {
		Batch struct {
			Frames []any `json:"frames"`
		} `json:"batch"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wire); err != nil {
		t.Fatalf("README.md's batch example is not {\"batch\":{\"frames\":[...]}}: %v", err)
	}
	n := len(wire.Batch.Frames)
	if n == 0 || n > len(expect) {
		t.Fatalf("README.md's batch example holds %d frames", n)
	}
	for i, f := range wire.Batch.Frames {
		var want any
		json.Unmarshal([]byte(expect[len(expect)-n+i]), &want)
		if !matches(want, f) {
			t.Errorf("README.md's batch example, frame %d: %v is not the try's %s", i, f, expect[len(expect)-n+i])
		}
	}
}
