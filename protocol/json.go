package protocol

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// The corral.v1.json subprotocol; doc.go describes the format. This file
// holds the encoder's runtime: the append helpers that the generated
// per-message functions (client_json.pb.go) call. jsondecode.go and
// jsonscan.go decode.
//
// The encoder appends: it runs once per room message and encoding on the
// server, without reflection or encoding/json.

// comma appends the separator before a member of the object whose first
// member would start at start.
func comma(b []byte, start int) []byte {
	if len(b) > start {
		return append(b, ',')
	}
	return b
}

// The append*Field helpers write `key` and a value unless the value is
// zero. key includes its quotes and colon, e.g. `"room":`.

func appendStringField(b []byte, start int, key, v string) []byte {
	if v == "" {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return appendString(b, v)
}

func appendUintField(b []byte, start int, key string, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return strconv.AppendUint(b, v, 10)
}

func appendIntField(b []byte, start int, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return strconv.AppendInt(b, v, 10)
}

func appendBoolField(b []byte, start int, key string, v bool) []byte {
	if !v {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return append(b, "true"...)
}

// appendBytesField writes the (corral.v1.inline_json) bytes field key
// inline when it is JSON that decodes back to the same bytes, and in base64
// under key+"Base64" otherwise: payloads, and presence states ("state",
// "presenceState").
func appendBytesField(b []byte, start int, key string, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	b = comma(b, start)
	b = append(b, '"')
	b = append(b, key...)
	if inlinePayload(p) {
		b = append(b, `":`...)
		return append(b, p...)
	}
	b = append(b, `Base64":"`...)
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}

// inlinePayload reports whether p can be written as an inline JSON value
// that a decoder reads back byte for byte: valid JSON, valid UTF-8 (text
// messages must be), no white space around it (the decoder keeps only the
// value), and not null (which decodes as no payload).
func inlinePayload(p []byte) bool {
	return !isSpace(p[0]) && !isSpace(p[len(p)-1]) &&
		string(p) != "null" && validJSON(p)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

const hexDigits = "0123456789abcdef"

// safeASCII[c] is true for ASCII bytes written as they are in a JSON
// string.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString writes s as a JSON string. Control characters are escaped,
// invalid UTF-8 becomes \ufffd, and U+2028 and U+2029 are escaped so the
// output is also valid JavaScript.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
