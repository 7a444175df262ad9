package safetext_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/corral-rt/corral/internal/safetext"
)

func TestReason(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"short":          {"bye", "bye"},
		"exact":          {strings.Repeat("a", 123), strings.Repeat("a", 123)},
		"long ascii":     {strings.Repeat("a", 200), strings.Repeat("a", 120) + "…"},
		"cut in a rune":  {"x" + strings.Repeat("é", 80), "x" + strings.Repeat("é", 59) + "…"},
		"invalid bytes":  {"a\xc3b", "a\uFFFDb"},
		"lone last byte": {"ab\xc3", "ab\uFFFD"},
	} {
		t.Run(name, func(t *testing.T) {
			got := safetext.Reason(tc.in)
			if got != tc.want {
				t.Fatalf("Reason(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"short":    {"abc", `"abc"`},
		"control":  {"a\nb\u202e", `"a\nb\u202e"`},
		"long":     {strings.Repeat("é", 80), `"` + strings.Repeat("é", 16) + `"…`},
		"mid rune": {"x" + strings.Repeat("é", 80), `"x` + strings.Repeat("é", 15) + `"…`},
		"invalid":  {"\xff", `"\xff"`},
	} {
		t.Run(name, func(t *testing.T) {
			if got := safetext.Quote(tc.in); got != tc.want {
				t.Fatalf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if got := safetext.Quote([]byte(tc.in)); got != tc.want {
				t.Fatalf("Quote([]byte(%q)) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzReason: whatever the input, a reason is valid UTF-8 within the
// bound, and a prefix of the input when the input was valid UTF-8; a
// quote is bounded and valid UTF-8.
func FuzzReason(f *testing.F) {
	for _, s := range []string{"", "bye", strings.Repeat("é", 80), "a\xc3", strings.Repeat("🎉", 40)} {
		f.Add(s, 123)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = 3 + int(uint(max)%300)
		got := safetext.Truncate(s, max)
		if !utf8.ValidString(got) || len(got) > max {
			t.Fatalf("Truncate(%q, %d) = %q: %d bytes, valid %v", s, max, got, len(got), utf8.ValidString(got))
		}
		if utf8.ValidString(s) && !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
			t.Fatalf("Truncate(%q, %d) = %q is not a prefix", s, max, got)
		}
		if r := safetext.Reason(s); !utf8.ValidString(r) || len(r) > safetext.MaxReason {
			t.Fatalf("Reason(%q) = %q", s, r)
		}
		// Every escaped byte is at most 4 characters (\xff), a rune at
		// most 10 (\U0010ffff): bounded whatever the input.
		if q := safetext.Quote(s); !utf8.ValidString(q) || len(q) > 2+32*4+len("…") {
			t.Fatalf("Quote(%q) = %q: %d bytes", s, q, len(q))
		}
	})
}
