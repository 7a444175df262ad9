package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/corral-rt/corral/config"
)

var update = flag.Bool("update", false, "rewrite docs/corral.schema.json and the key table of docs/CONFIG.md")

const (
	schemaPath = "../../docs/corral.schema.json"
	configDoc  = "../../docs/CONFIG.md"
	keysBegin  = "<!-- keys:begin (generated: go test ./cmd/corral -run TestConfigDocsCurrent -update) -->\n"
	keysEnd    = "<!-- keys:end -->\n"
)

// TestConfigDocsCurrent: the JSON Schema and the key table of CONFIG.md
// are what package config's Settings and roomclass.Class generate.
func TestConfigDocsCurrent(t *testing.T) {
	const fix = "regenerate: go test ./cmd/corral -run TestConfigDocsCurrent -update"
	schema, err := config.Schema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(keysBegin)), bytes.Index(doc, []byte(keysEnd))
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q markers", configDoc, keysBegin, keysEnd)
	}
	newDoc := string(doc[:i+len(keysBegin)]) + "\n" + config.KeyTable() + "\n" + string(doc[j:])
	if *update {
		if err := os.WriteFile(schemaPath, schema, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(configDoc, []byte(newDoc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old, err := os.ReadFile(schemaPath); err != nil || !bytes.Equal(old, schema) {
		t.Errorf("%s is stale (%v); %s", schemaPath, err, fix)
	}
	if newDoc != string(doc) {
		t.Errorf("%s: the key table is stale; %s", configDoc, fix)
	}
	if !strings.Contains(string(schema), `"max-members"`) {
		t.Error("the schema lacks the class keys")
	}
}

// TestConfigDocExample: CONFIG.md shows docs/corral.example.yaml as it is.
func TestConfigDocExample(t *testing.T) {
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../docs/corral.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append(append([]byte("```yaml\n"), example...), "```"...)) {
		t.Errorf("%s: the example differs from docs/corral.example.yaml: copy the file into its yaml block", configDoc)
	}
}
