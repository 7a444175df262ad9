package safetext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxReason bounds every close reason and error message corral sends, in
// bytes: a WebSocket close frame's payload is at most 125 bytes, two of
// them the code.
const MaxReason = 123

// maxQuoted bounds the part of a client's input that an error quotes.
const maxQuoted = 32

// Reason returns s as valid UTF-8 of at most MaxReason bytes: invalid
// bytes become U+FFFD, and a longer text is cut on a character boundary
// and ends with "…".
func Reason(s string) string { return Truncate(s, MaxReason) }

// Truncate returns s as valid UTF-8 of at most max bytes (max >= 3): invalid
// bytes become U+FFFD, and a longer text is cut on a character boundary and
// ends with "…".
func Truncate(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// Quote returns input (a client's or a caller's text that an error
// echoes) quoted as by %q, at most 32 bytes of it, then "…" when cut: an
// error never carries more than a bounded part of what it complains about,
// and never a control character.
func Quote[T ~string | ~[]byte](input T) string {
	s := string(input)
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
