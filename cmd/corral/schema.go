package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

// The config file's JSON Schema (docs/corral.schema.json) and key table
// (docs/CONFIG.md), generated from the flag sets and roomclass.Class: a
// test fails when the checked-in copies are stale.

// flagDoc is one flag of one or more commands.
type flagDoc struct {
	name, usage, def string
	kind             any // the Go type of its value
	commands         []string
}

// flagDocs is every flag of every command, by name.
func flagDocs() []*flagDoc {
	byName := map[string]*flagDoc{}
	for _, m := range modes {
		fs, _ := flagSet(m)
		fs.VisitAll(func(fl *flag.Flag) {
			d := byName[fl.Name]
			if d == nil {
				_, usage := flag.UnquoteUsage(fl)
				d = &flagDoc{name: fl.Name, usage: usage, def: fl.DefValue, kind: fl.Value.(flag.Getter).Get()}
				byName[fl.Name] = d
			}
			d.commands = append(d.commands, commandName(m))
			if fl.DefValue != d.def && !strings.Contains(d.def, commandName(m)+": ") {
				d.def += "; " + commandName(m) + ": " + fl.DefValue
			}
		})
	}
	out := make([]*flagDoc, 0, len(byName))
	for _, d := range byName {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *flagDoc) int { return strings.Compare(a.name, b.name) })
	return out
}

func commandName(m server.Mode) string {
	switch m {
	case server.EdgeOnly:
		return "edge"
	case server.CoreOnly:
		return "core"
	}
	return "serve"
}

// configSchema is the JSON Schema of the config file.
func configSchema() ([]byte, error) {
	props := map[string]any{
		"version": map[string]any{"type": "string", "description": "names this file in the log and in corral_config_info"},
		"rooms": map[string]any{
			"type": "array", "items": roomclass.ClassSchema(),
			"description": "room classes, tried in order: the first whose match fits a room's name gives its settings; other rooms get the default class (the flags)",
		},
	}
	for _, d := range flagDocs() {
		if d.name == "config" {
			continue
		}
		var p map[string]any
		switch d.kind.(type) {
		case bool:
			p = map[string]any{"type": "boolean"}
		case int, int64:
			p = map[string]any{"type": "integer"}
		case float64:
			p = map[string]any{"type": "number"}
		case time.Duration:
			p = map[string]any{"type": "string", "pattern": roomclass.DurationPattern}
		default:
			p = map[string]any{"anyOf": []any{
				map[string]any{"type": "string"},
				map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			}}
		}
		p["description"] = fmt.Sprintf("%s (commands: %s)", d.usage, strings.Join(d.commands, ", "))
		props[d.name] = p
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

// keyTable is the markdown key table of docs/CONFIG.md.
func keyTable() string {
	var b strings.Builder
	b.WriteString("### Room class keys\n\n| key | meaning | built-in default |\n| --- | --- | --- |\n")
	for _, k := range roomclass.ClassKeys() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k.Path, cell(k.Doc), code(k.Default))
	}
	b.WriteString("\nThe default class takes `history.size` from `history` (0: 1000 in memory,\n10000 in Redis), `history.ttl` from `history-ttl`, `signal-tick`,\n`max-payload`, `presence.grace` and `presence.max-diff` from the flags of\nthe same names; its other keys are the built-in defaults above.\n")
	b.WriteString("\n### Flag keys\n\n| key | commands | meaning | default |\n| --- | --- | --- | --- |\n")
	for _, d := range flagDocs() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.name, strings.Join(d.commands, ", "), cell(d.usage), code(d.def))
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
