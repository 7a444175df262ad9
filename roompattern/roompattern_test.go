package roompattern_test

import (
	"strings"
	"testing"

	"github.com/corral-rt/corral/roompattern"
)

func TestMatch(t *testing.T) {
	tests := map[string]struct {
		grants []string
		room   string
		want   bool
	}{
		"no grants":                 {nil, "lobby", false},
		"exact":                     {[]string{"lobby"}, "lobby", true},
		"exact mismatch":            {[]string{"lobby"}, "lobby2", false},
		"exact is not prefix":       {[]string{"lobby"}, "lob", false},
		"empty pattern, empty room": {[]string{""}, "", true},
		"empty pattern":             {[]string{""}, "a", false},
		"star":                      {[]string{"*"}, "anything:at/all", true},
		"star matches empty room":   {[]string{"*"}, "", true},
		"double star":               {[]string{"**"}, "x", true},
		"prefix":                    {[]string{"game:*"}, "game:42", true},
		"prefix matches empty rest": {[]string{"game:*"}, "game:", true},
		"prefix mismatch":           {[]string{"game:*"}, "gam", false},
		"prefix is case-sensitive":  {[]string{"game:*"}, "GAME:1", false},
		"suffix":                    {[]string{"*:chat"}, "org:chat", true},
		"suffix mismatch":           {[]string{"*:chat"}, "org:chats", false},
		"middle":                    {[]string{"org:*:chat"}, "org:acme:chat", true},
		"middle empty":              {[]string{"org:*:chat"}, "org::chat", true},
		"middle spans colons":       {[]string{"org:*:chat"}, "org:a:b:chat", true},
		"middle mismatch":           {[]string{"org:*:chat"}, "org:acme:voice", false},
		"prefix and suffix overlap": {[]string{"ab*ba"}, "aba", false},
		"prefix and suffix abut":    {[]string{"ab*ba"}, "abba", true},
		"prefix equals suffix":      {[]string{"a*a"}, "a", false},
		"prefix equals suffix 2":    {[]string{"a*a"}, "aa", true},
		"segments in order":         {[]string{"*a*b*"}, "xaxbx", true},
		"segments out of order":     {[]string{"*a*b*"}, "xbxax", false},
		"segments must not overlap": {[]string{"*aba*aba*"}, "ababa", false},
		"segments just fit":         {[]string{"*aba*aba*"}, "abaaba", true},
		"middle segment before suffix": {
			[]string{"a*bc*c"}, "abcc", true,
		},
		"middle cannot use suffix": {[]string{"a*bc*bc"}, "abc", false},
		"leftmost middle":          {[]string{"*ab*b"}, "abab", true},
		"star is literal in room":  {[]string{"a*"}, "a*", true},
		"question mark is literal": {[]string{"a?c"}, "abc", false},
		"brackets are literal":     {[]string{"[ab]"}, "a", false},
		"brackets match literally": {[]string{"[ab]*"}, "[ab]x", true},
		"backslash is literal":     {[]string{`a\*`}, `a\bc`, true},
		"second grant matches":     {[]string{"game:*", "lobby"}, "lobby", true},
		"no grant matches":         {[]string{"game:*", "lobby"}, "chat", false},
		"multibyte":                {[]string{"é*ü"}, "éxyzü", true},
		"star splits no rune":      {[]string{"*é"}, "aé", true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := roompattern.Match(tt.grants, tt.room); got != tt.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tt.grants, tt.room, got, tt.want)
			}
		})
	}
}

// TestMatchPathological checks that patterns which make a backtracking
// matcher take exponential (or quadratic, with a long room) time finish.
func TestMatchPathological(t *testing.T) {
	room := strings.Repeat("a", 100_000)
	patterns := []string{
		strings.Repeat("*a", 50) + "*b",
		strings.Repeat("a*", 1000) + "b",
		"*" + strings.Repeat("a", 5000) + "b*",
		strings.Repeat("*", 10_000) + "b",
	}
	for _, p := range patterns {
		if roompattern.Match([]string{p}, room) {
			t.Errorf("Match(%.20q..., a*100000) = true, want false", p)
		}
	}
	if !roompattern.Match([]string{strings.Repeat("*a", 50) + "*"}, room) {
		t.Error("Match(*a*a...*, a*100000) = false, want true")
	}
}
