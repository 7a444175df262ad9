package outbox

import "testing"

// TestParseCrash: the test hook is off when unset and refuses values it
// does not understand, so that a typo in a test never silently runs
// without its crash.
func TestParseCrash(t *testing.T) {
	for v, want := range map[string]crashPoint{
		"":                 {},
		"before-publish:1": {step: crashBeforePublish, at: 1},
		"after-publish:30": {step: crashAfterPublish, at: 30},
	} {
		got, err := parseCrash(v)
		if err != nil || got != want {
			t.Errorf("parseCrash(%q) = %+v, %v; want %+v", v, got, err, want)
		}
	}
	for _, v := range []string{"after-publish", "after-publish:0", "after-publish:x", "during-publish:3", ":3"} {
		if _, err := parseCrash(v); err == nil {
			t.Errorf("parseCrash(%q): no error", v)
		}
	}
}
