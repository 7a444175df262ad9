package protocol

import "unicode/utf8"

// maxDepth is the deepest nesting of objects and arrays validJSON accepts,
// the same as encoding/json's.
const maxDepth = 10000

// validJSON reports whether b is one valid JSON value, at most maxDepth
// deep, and valid UTF-8: what json.Valid and utf8.Valid report together,
// in one pass and several times faster. Decoding starts with it.
func validJSON(b []byte) bool {
	v := validator{b: b}
	v.ws()
	if !v.value(0) {
		return false
	}
	v.ws()
	return v.i == len(v.b)
}

type validator struct {
	b []byte
	i int
}

// plainString[c] is true for the bytes that stand for themselves inside a
// JSON string: printable ASCII other than '"' and '\\'.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (v *validator) ws() {
	for v.i < len(v.b) && isSpace(v.b[v.i]) {
		v.i++
	}
}

// value checks one value at v.i, inside depth open objects and arrays.
func (v *validator) value(depth int) bool {
	if v.i >= len(v.b) {
		return false
	}
	switch v.b[v.i] {
	case '{':
		if depth >= maxDepth {
			return false
		}
		v.i++
		v.ws()
		if v.i < len(v.b) && v.b[v.i] == '}' {
			v.i++
			return true
		}
		for {
			if !v.string() {
				return false
			}
			v.ws()
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return false
			}
			v.i++
			v.ws()
			if !v.value(depth + 1) {
				return false
			}
			v.ws()
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case ',':
				v.i++
				v.ws()
			case '}':
				v.i++
				return true
			default:
				return false
			}
		}
	case '[':
		if depth >= maxDepth {
			return false
		}
		v.i++
		v.ws()
		if v.i < len(v.b) && v.b[v.i] == ']' {
			v.i++
			return true
		}
		for {
			if !v.value(depth + 1) {
				return false
			}
			v.ws()
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case ',':
				v.i++
				v.ws()
			case ']':
				v.i++
				return true
			default:
				return false
			}
		}
	case '"':
		return v.string()
	case 't':
		return v.literal("true")
	case 'f':
		return v.literal("false")
	case 'n':
		return v.literal("null")
	}
	end := numberEnd(v.b, v.i)
	if end < 0 {
		return false
	}
	v.i = end
	return true
}

func (v *validator) literal(lit string) bool {
	if len(v.b)-v.i < len(lit) || string(v.b[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

// string checks a string at v.i, its escapes and its UTF-8.
func (v *validator) string() bool {
	if v.i >= len(v.b) || v.b[v.i] != '"' {
		return false
	}
	v.i++
	for {
		for v.i < len(v.b) && plainString[v.b[v.i]] {
			v.i++
		}
		if v.i >= len(v.b) {
			return false
		}
		switch c := v.b[v.i]; {
		case c == '"':
			v.i++
			return true
		case c == '\\':
			v.i++
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				v.i++
			case 'u':
				if len(v.b)-v.i < 5 {
					return false
				}
				for _, h := range v.b[v.i+1 : v.i+5] {
					if !isHex(h) {
						return false
					}
				}
				v.i += 5
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			r, size := utf8.DecodeRune(v.b[v.i:])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			v.i += size
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
