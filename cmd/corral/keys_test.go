package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/config"
)

// sample is a valid value, not the default, of a key's type.
func sample(k *config.Key) string {
	for _, v := range k.Enum {
		if v != k.Default {
			return v
		}
	}
	switch k.Type {
	case reflect.TypeFor[time.Duration](), reflect.TypeFor[config.Window]():
		return "7s"
	case reflect.TypeFor[[]string]():
		return "a,b"
	}
	switch k.Type.Kind() {
	case reflect.Bool:
		if k.Default == "true" {
			return "false"
		}
		return "true"
	case reflect.String:
		return "sample-value"
	}
	return "7"
}

// TestKeysAgree: one table, package config's keys, is every flag, every
// environment variable, every file key, every schema property, every
// row of docs/CONFIG.md and of `corral config keys`, and --help lists
// exactly the flags.
func TestKeysAgree(t *testing.T) {
	schemaJSON, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	var listed bytes.Buffer
	if err := configCommand([]string{"keys"}, &listed); err != nil {
		t.Fatal(err)
	}
	help := map[string]string{}
	for _, cmd := range config.Commands {
		var b bytes.Buffer
		if _, err := config.Load(cmd, []string{"-h"}, noEnv, &b); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		help[cmd] = b.String()
	}
	for _, k := range config.Keys() {
		v := sample(k)
		if k.Name == "config" {
			v = writeConfig(t, "version: x\n")
		}
		if k.Name != "config" {
			if p, ok := schema.Properties[k.Name]; !ok || !strings.Contains(p.Description, k.Env) {
				t.Errorf("%s: not in %s with %s", k.Name, schemaPath, k.Env)
			}
		}
		if !bytes.Contains(doc, fmt.Appendf(nil, "| `%s` | %s | ", k.Name, strings.Join(k.Commands, ", "))) || !bytes.Contains(doc, []byte("`"+k.Env+"`")) {
			t.Errorf("%s: no row in %s", k.Name, configDoc)
		}
		if !strings.Contains(listed.String(), "\n"+k.Name+" ") || !strings.Contains(listed.String(), k.Env) {
			t.Errorf("%s: not listed by corral config keys", k.Name)
		}
		for _, cmd := range config.Commands {
			got := strings.Contains(help[cmd], "  --"+k.Name+" ") || strings.Contains(help[cmd], "  --"+k.Name+"\n")
			if got != k.IsFlag(cmd) {
				t.Errorf("corral %s -h lists --%s: %v, want %v", cmd, k.Name, got, k.IsFlag(cmd))
			}
			if !k.Has(cmd) {
				continue
			}
			// The flag, or its refusal.
			l, err := config.Load(cmd, []string{"--" + k.Name + "=" + v}, noEnv, &bytes.Buffer{})
			switch {
			case k.IsFlag(cmd) && (err != nil || !l.IsSet(k.Name) || k.Get(&l.Settings) != v):
				t.Errorf("%s --%s=%s: %v", cmd, k.Name, v, err)
			case !k.IsFlag(cmd) && (err == nil || !strings.Contains(err.Error(), k.Env)):
				t.Errorf("%s --%s: %v, want a refusal naming %s", cmd, k.Name, err, k.Env)
			}
			if k.Name == "config" {
				continue // a file, read in the other tests
			}
			// The environment.
			env := func(name string) (string, bool) { return v, name == k.Env }
			if l, err := config.Load(cmd, nil, env, &bytes.Buffer{}); err != nil || !l.IsSet(k.Name) || k.Get(&l.Settings) != v {
				t.Errorf("%s %s=%s: %v", cmd, k.Env, v, err)
			}
			// The file.
			f, err := config.Parse("f.yaml", fmt.Appendf(nil, "%s: %q\n", k.Name, v))
			if err != nil {
				t.Fatal(err)
			}
			l = config.Defaults(cmd)
			if err := l.ApplyFile(f); err != nil || !l.IsSet(k.Name) || k.Get(&l.Settings) != v {
				t.Errorf("%s file key %s: %s: %v", cmd, k.Name, v, err)
			}
		}
	}
	// At most 25 flags a command, grouped.
	for _, cmd := range config.Commands {
		if n := strings.Count(help[cmd], "\n  --"); n > 25 || n < 5 {
			t.Errorf("corral %s -h: %d flags", cmd, n)
		}
		for _, g := range []string{"Listeners:", "Auth:", "Observability:"} {
			if !strings.Contains(help[cmd], "\n"+g+"\n") {
				t.Errorf("corral %s -h: no group %s:\n%s", cmd, g, help[cmd])
			}
		}
	}
}

func noEnv(string) (string, bool) { return "", false }
