package safetext_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-rt/corral/internal/safetext"
)

func TestCheckName(t *testing.T) {
	for name, tc := range map[string]struct {
		in string
		ok bool
	}{
		"ascii":                {"lobby", true},
		"punctuation":          {"team:42/chat-1", true},
		"inner space":          {"the lobby", true},
		"accents":              {"café", true},
		"cjk":                  {"大厅", true},
		"emoji":                {"room🎉", true},
		"combining mark":       {"e\u0301", true},
		"empty":                {"", false},
		"too long":             {strings.Repeat("a", 201), false},
		"not utf8":             {"lobby\xc3", false},
		"leading space":        {" lobby", false},
		"trailing space":       {"lobby ", false},
		"nul":                  {"lob\x00by", false},
		"tab":                  {"lob\tby", false},
		"newline":              {"lobby\nfake log line", false},
		"del":                  {"lobby\x7f", false},
		"U+0085 NEL":           {"lobby\u0085", false},
		"U+009B CSI":           {"lobby\u009b31m", false},
		"U+00A0 nbsp":          {"the\u00a0lobby", false},
		"U+00AD soft hyphen":   {"lob\u00adby", false},
		"U+061C arabic mark":   {"lobby\u061c", false},
		"U+200B zero width":    {"lob\u200bby", false},
		"U+200D zwj":           {"lob\u200dby", false},
		"U+200E lrm":           {"lobby\u200e", false},
		"U+202E rlo":           {"\u202eybbol", false},
		"U+2066 lri":           {"lobby\u2066", false},
		"U+2028 line sep":      {"lobby\u2028", false},
		"U+2029 para sep":      {"lobby\u2029", false},
		"U+3000 ideo space":    {"lobby\u3000", false},
		"U+FEFF bom":           {"\ufefflobby", false},
		"U+E000 private use":   {"lobby\ue000", false},
		"U+F0000 private use":  {"lobby\U000f0000", false},
		"U+0378 unassigned":    {"lobby\u0378", false},
		"U+E0001 language tag": {"lobby\U000e0001", false},
		"surrogate bytes":      {"lobby\xed\xa0\x80", false},
	} {
		t.Run(name, func(t *testing.T) {
			err := safetext.CheckName("room name", tc.in, 200)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckName(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, safetext.ErrInvalidName) {
				t.Errorf("error %v does not wrap ErrInvalidName", err)
			}
			if !strings.Contains(err.Error(), "room name") {
				t.Errorf("error %q does not say what was checked", err)
			}
			if len(tc.in) > 1 && strings.Contains(err.Error(), tc.in) {
				t.Errorf("error %q echoes the name", err)
			}
		})
	}
}
