package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/roomclass"
)

// FuzzParse: any bytes give a file or located errors, never a panic; a
// file's classes decode or give located errors too.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "version: x\n", "history: 5\norigins: [a, b]\n",
		"rooms:\n  - name: a\n    match: [\"a:*\", b]\n    history: {size: 3, ttl: 1h}\n    presence: {enabled: false}\n",
		"rooms:\n  - name: a\n    match: a\n    histroy: 1\n", "rooms: [1, [2], {x: y}]\n", "a: &x [*x]\n",
		"rooms:\n  - {name: a, match: a, publish: none, hooks: {publish: true}}\n", "- 1\n", "x: {y: z}\n", "---\na: 1\n---\nb: 2\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := config.Parse("f.yaml", data)
		if err != nil {
			var errs roomclass.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %v is not roomclass.Errors", err)
			}
			for _, e := range errs {
				if !strings.HasPrefix(e.Error(), "f.yaml") {
					t.Fatalf("error %q does not name the file", e)
				}
			}
			return
		}
		cs, err := file.Classes(roomclass.Default(), roomclass.CheckOptions{SessionTTL: time.Minute})
		if err != nil {
			var errs roomclass.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %v is not roomclass.Errors", err)
			}
			return
		}
		tb := roomclass.NewTable(roomclass.Default(), cs)
		for _, c := range cs {
			for _, p := range c.Match {
				if got := tb.Lookup(p); got == nil {
					t.Fatalf("no class for %q", p)
				}
			}
		}
	})
}
