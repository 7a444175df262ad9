package safetext

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// ErrInvalidName is wrapped by every error of [CheckName].
var ErrInvalidName = errors.New("invalid name")

// CheckName checks a name a client or a service chose (what names it in the
// error: "room name", "user id", "signal key"...): 1 to max bytes of UTF-8
// made of letters, marks, numbers, punctuation, symbols and the ASCII space,
// not at either end.
//
// Refused, by Unicode category: controls (Cc, such as U+0085 and U+009B),
// format characters (Cf: U+200B zero width space, U+202E and the other
// bidi controls, U+FEFF), line and paragraph separators (Zl U+2028, Zp
// U+2029), private use (Co), surrogates (Cs, never valid UTF-8) and
// unassigned code points (Cn). Spaces other than U+0020 (Zs: U+00A0,
// U+3000...) are refused too, and so is U+0020 at either end: each would
// make a name that looks like another one, or hides in a log line.
//
// The error says which character and where, never the name itself, so it
// is safe to send to the client.
func CheckName(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidName, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalidName, what, max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalidName, what)
	case s[0] == ' ' || s[len(s)-1] == ' ':
		return fmt.Errorf("%w: %s starts or ends with a space", ErrInvalidName, what)
	}
	for i, r := range s {
		if !allowed(r) {
			return fmt.Errorf("%w: %s has %U, an invisible or control character, at byte %d",
				ErrInvalidName, what, r, i)
		}
	}
	return nil
}

// allowed reports whether r may appear in a name: unicode.IsPrint is
// exactly L, M, N, P, S and U+0020, and none of those ranges holds an
// unassigned code point.
func allowed(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 0x20 && r < 0x7f
	}
	return unicode.IsPrint(r)
}
