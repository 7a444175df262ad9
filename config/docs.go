package config

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/corral-rt/corral/roomclass"
)

// Usage writes cmd's --help: its flags by group, then where the other
// keys are.
func Usage(w io.Writer, cmd string) {
	fmt.Fprintf(w, "Usage: corral %s [flags]\n", cmd)
	n := 0
	for _, g := range Groups {
		first := true
		for _, k := range keys {
			if k.Group != g || !k.IsFlag(cmd) {
				continue
			}
			if first {
				fmt.Fprintf(w, "\n%s%s:\n", strings.ToUpper(g[:1]), g[1:])
				first = false
			}
			fmt.Fprintf(w, "  --%s", k.Name)
			if a := argName(k); a != "" {
				fmt.Fprintf(w, " %s", a)
			}
			fmt.Fprintf(w, "\n      %s [%s]", k.Help, k.Env)
			if d := k.DefaultFor(cmd); d != "" {
				fmt.Fprintf(w, " (default %s)", d)
			}
			fmt.Fprintln(w)
		}
	}
	for _, k := range keys {
		if k.Has(cmd) && !k.IsFlag(cmd) {
			n++
		}
	}
	fmt.Fprintf(w, "\nEvery flag can also be set by its environment variable (in brackets) or\n"+
		"by the key of the same name in the config file. corral %s has %d more\n"+
		"settings, keys of the file and CORRAL_* variables only: `corral config\n"+
		"keys %s` lists them. A flag beats its variable, which beats the file.\n", cmd, n, cmd)
}

// argName is the placeholder of a flag's value in --help.
func argName(k *Key) string {
	switch k.Type.Kind() {
	case reflect.Bool:
		return ""
	case reflect.String:
		switch {
		case strings.HasSuffix(k.Name, "-file") || k.Name == "config" || k.Name == "jwt-public-keys":
			return "FILE"
		case strings.HasSuffix(k.Name, "addr"):
			return "HOST:PORT"
		case k.Name == "core" || k.Name == "redis" || k.Name == "outbox" || k.Name == "hooks-url":
			return "URL"
		}
		return "TEXT"
	}
	switch k.Type {
	case reflect.TypeFor[Limit]():
		return "N|unlimited"
	case reflect.TypeFor[Rate]():
		return "RATE|unlimited"
	case reflect.TypeFor[Window]():
		return "DURATION|off"
	case reflect.TypeFor[time.Duration]():
		return "DURATION"
	}
	return "N"
}

// PrintKeys writes `corral config keys`: every key of cmd (every key when
// cmd is ""), one a line: name, variable, default, unit, flag or not,
// help.
func PrintKeys(w io.Writer, cmd string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tENVIRONMENT\tDEFAULT\tUNIT\tFLAG\tMEANING")
	for _, k := range keys {
		if cmd != "" && !k.Has(cmd) {
			continue
		}
		def, isFlag := k.Default, "flag"
		if cmd != "" {
			def = k.DefaultFor(cmd)
			if !k.IsFlag(cmd) {
				isFlag = "key"
			}
		} else if !k.Flag {
			isFlag = "key"
		}
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, k.Env, def, k.Unit, isFlag, k.Help)
	}
	tw.Flush()
}

// Schema is the JSON Schema of the config file (docs/corral.schema.json).
func Schema() ([]byte, error) {
	props := map[string]any{
		"version": map[string]any{"type": "string", "description": "names this file in the log and in corral_config_info"},
		"rooms": map[string]any{
			"type": "array", "items": roomclass.ClassSchema(),
			"description": "room classes, tried in order: the first whose match fits a room's name gives its settings; other rooms get the default class (the keys)",
		},
	}
	for _, k := range keys {
		if k.Name == "config" {
			continue
		}
		p := typeSchema(k.Type)
		if len(k.Enum) > 0 {
			p = map[string]any{"enum": k.Enum}
		}
		p["description"] = fmt.Sprintf("%s (commands: %s; %s)", k.Help, strings.Join(k.Commands, ", "), k.Env)
		props[k.Name] = p
	}
	s := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  "https://github.com/corral-rt/corral/docs/corral.schema.json",
		"title":                "corral config file (docs/CONFIG.md)",
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	b, err := json.MarshalIndent(s, "", "  ")
	return append(b, '\n'), err
}

func typeSchema(t reflect.Type) map[string]any {
	duration := map[string]any{"type": "string", "pattern": roomclass.DurationPattern}
	switch t {
	case reflect.TypeFor[time.Duration]():
		return duration
	case reflect.TypeFor[Window]():
		return map[string]any{"anyOf": []any{duration, map[string]any{"const": "off"}}}
	case reflect.TypeFor[Limit]():
		return map[string]any{"anyOf": []any{map[string]any{"type": "integer", "minimum": 1}, map[string]any{"const": "unlimited"}}}
	case reflect.TypeFor[Rate]():
		return map[string]any{"anyOf": []any{map[string]any{"type": "number", "exclusiveMinimum": 0}, map[string]any{"const": "unlimited"}}}
	case reflect.TypeFor[[]string]():
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string"},
			map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		}}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	}
	return map[string]any{"type": "string"}
}

// KeyTable is the generated part of docs/CONFIG.md: the room class keys
// and the keys of the commands.
func KeyTable() string {
	var b strings.Builder
	b.WriteString("### Room class keys\n\n| key | meaning | built-in default |\n| --- | --- | --- |\n")
	for _, k := range roomclass.ClassKeys() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k.Path, cell(k.Doc), code(k.Default))
	}
	b.WriteString("\nThe default class takes `history.size` from `history` (0: 1000 in memory,\n10000 in Redis), `history.ttl` from `history-ttl`, `signal-tick`,\n`max-payload`, `presence.grace`, `presence.max-diff` and the `hooks-policy-*`\nand `hooks-join-cache-ttl` keys; its other keys are the built-in defaults above.\n")
	b.WriteString("\n### Keys\n\nA **flag** key is also a command-line flag (`--key`) of its commands;\nevery key is a file key and an environment variable.\n\n| key | commands | flag | environment | default | unit | meaning |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range keys {
		def := code(k.Default)
		if k.CoreDefault != "" {
			def += "; core: " + code(k.CoreDefault)
		}
		isFlag := ""
		if k.Flag {
			isFlag = "flag"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s | %s | %s |\n", k.Name, strings.Join(k.Commands, ", "), isFlag, k.Env, def, k.Unit, cell(k.Help))
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}
