package delta_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/corral-rt/corral/delta"
)

var update = flag.Bool("update", false, "rewrite clients/js/test/golden/deltas.json")

// fixture is clients/js/test/golden/deltas.json, which
// clients/js/test/delta.test.ts decodes: the JS decoder against deltas
// this encoder wrote.
const fixture = "../clients/js/test/golden/deltas.json"

type fixtureCase struct {
	Name   string `json:"name"`
	Source string `json:"source"` // base64
	Target string `json:"target"` // base64
	Delta  string `json:"delta"`  // base64
}

// TestJSFixtureCurrent checks that the JS test's fixture holds exactly
// what Encode writes now (go test ./delta -run Fixture -update rewrites
// it).
func TestJSFixtureCurrent(t *testing.T) {
	var cases []fixtureCase
	b64 := base64.StdEncoding.EncodeToString
	for _, p := range pairs() {
		cases = append(cases, fixtureCase{p.name, b64([]byte(p.src)), b64([]byte(p.target)),
			b64(delta.Encode([]byte(p.src), []byte(p.target)))})
	}
	want, err := json.MarshalIndent(cases, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(fixture, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatalf("%v: run go test ./delta -run Fixture -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./delta -run Fixture -update", fixture)
	}
}
