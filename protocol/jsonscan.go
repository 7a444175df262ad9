package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
)

// decoder walks a message that validJSON accepted. Its methods read one
// value at d.i, skipping white space before it.
type decoder struct {
	b []byte
	i int
}

// peek skips white space and returns the next byte. The message is valid,
// so there is one wherever a value or a delimiter is expected.
func (d *decoder) peek() byte {
	for isSpace(d.b[d.i]) {
		d.i++
	}
	return d.b[d.i]
}

// nextKey reads the next member name and its colon from an object whose {
// has been read, or the closing } and returns false.
func (d *decoder) nextKey() ([]byte, bool) {
	switch d.peek() {
	case '}':
		d.i++
		return nil, false
	case ',':
		d.i++
		d.peek()
	}
	raw, escaped := d.rawString()
	key := raw[1 : len(raw)-1]
	if escaped {
		key = []byte(unquote(raw))
	}
	d.peek() // ':'
	d.i++
	return key, true
}

// nextElem moves to the next element of an array whose [ has been read, or
// reads the closing ] and returns false.
func (d *decoder) nextElem() bool {
	switch d.peek() {
	case ']':
		d.i++
		return false
	case ',':
		d.i++
	}
	return true
}

// rawString reads the string at d.i and returns its bytes with quotes and
// whether it contains escapes.
func (d *decoder) rawString() (raw []byte, escaped bool) {
	start := d.i
	d.i++
	for {
		switch d.b[d.i] {
		case '"':
			d.i++
			return d.b[start:d.i], escaped
		case '\\':
			escaped = true
			d.i += 2
		default:
			d.i++
		}
	}
}

// unquote decodes a JSON string literal with escapes. encoding/json
// replaces lone surrogates with U+FFFD, so the result is valid UTF-8.
func unquote(raw []byte) string {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		panic("protocol: unquote of a validated JSON string: " + err.Error())
	}
	return s
}

// skip skips one value and returns its bytes.
func (d *decoder) skip() []byte {
	c := d.peek()
	start := d.i
	switch c {
	case '"':
		d.rawString()
	case '{', '[':
		depth := 0
		for {
			switch d.b[d.i] {
			case '"':
				d.rawString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			d.i++
			if depth == 0 {
				break
			}
		}
	default: // number, true, false, null
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return d.b[start:d.i]
			}
			d.i++
		}
	}
	return d.b[start:d.i]
}

func (d *decoder) typeErr(path, want string) error {
	var got string
	switch d.peek() {
	case '{':
		got = "object"
	case '[':
		got = "array"
	case '"':
		got = "string"
	case 't', 'f':
		got = "boolean"
	case 'n':
		got = "null"
	default:
		got = "number"
	}
	return badFrame(path, "want %s, got %s", want, got)
}

func (d *decoder) str(path string) (string, error) {
	switch d.peek() {
	case '"':
		raw, escaped := d.rawString()
		if escaped {
			return unquote(raw), nil
		}
		return string(raw[1 : len(raw)-1]), nil
	case 'n':
		d.skip()
		return "", nil
	}
	return "", d.typeErr(path, "string")
}

func (d *decoder) bool(path string) (bool, error) {
	switch d.peek() {
	case 't':
		d.skip()
		return true, nil
	case 'f', 'n':
		d.skip()
		return false, nil
	}
	return false, d.typeErr(path, "boolean")
}

// number returns the text of a number, or of a string holding one, and
// false for null.
func (d *decoder) number(path string) (text []byte, ok bool, err error) {
	switch c := d.peek(); {
	case c == '-' || '0' <= c && c <= '9':
		return d.skip(), true, nil
	case c == '"':
		raw, escaped := d.rawString()
		text = raw[1 : len(raw)-1]
		if escaped {
			text = []byte(unquote(raw))
		}
		if !isNumber(text) {
			return nil, false, badFrame(path, "%s is not a number", safetext.Quote(text))
		}
		return text, true, nil
	case c == 'n':
		d.skip()
		return nil, false, nil
	}
	return nil, false, d.typeErr(path, "number")
}

// uint reads an unsigned integer of the given bit size.
func (d *decoder) uint(path string, bits int) (uint64, error) {
	text, ok, err := d.number(path)
	if !ok {
		return 0, err
	}
	if u, ok := parseDigits(text); ok {
		if bits < 64 && u >= 1<<bits {
			return 0, badFrame(path, "%s out of range", safetext.Quote(text))
		}
		return u, nil
	}
	if u, err := strconv.ParseUint(string(text), 10, bits); err == nil {
		return u, nil
	}
	f, ok := parseIntegral(text)
	if !ok || f < 0 || f >= math.Ldexp(1, bits) {
		return 0, badFrame(path, "%s is not an unsigned %d-bit integer", safetext.Quote(text), bits)
	}
	return uint64(f), nil
}

// int reads a signed integer of the given bit size.
func (d *decoder) int(path string, bits int) (int64, error) {
	text, ok, err := d.number(path)
	if !ok {
		return 0, err
	}
	if u, ok := parseDigits(text); ok && u < 1<<(bits-1) {
		return int64(u), nil
	}
	if i, err := strconv.ParseInt(string(text), 10, bits); err == nil {
		return i, nil
	}
	f, ok := parseIntegral(text)
	if !ok || f < -math.Ldexp(1, bits-1) || f >= math.Ldexp(1, bits-1) {
		return 0, badFrame(path, "%s is not a %d-bit integer", safetext.Quote(text), bits)
	}
	return int64(f), nil
}

// code reads a Code as a number or as the name of a value.
func (d *decoder) code(path string) (corralv1.Code, error) {
	if d.peek() == '"' {
		raw, escaped := d.rawString()
		name := string(raw[1 : len(raw)-1])
		if escaped {
			name = unquote(raw)
		}
		if c, ok := corralv1.Code_value[name]; ok {
			return corralv1.Code(c), nil
		}
		return 0, badFrame(path, "unknown code %s", safetext.Quote(name))
	}
	i, err := d.int(path, 32)
	return corralv1.Code(i), err
}

// payload reads an inline JSON payload, copied out of the message. prev
// is the payload read so far; a second one is an error.
func (d *decoder) payload(path string, prev []byte) ([]byte, error) {
	if d.peek() == 'n' {
		d.skip()
		return prev, nil
	}
	if len(prev) > 0 {
		return nil, badFrame(path, "payload given twice")
	}
	return bytes.Clone(d.skip()), nil
}

// payloadBase64 reads a payload in base64, standard or URL alphabet,
// padded or not, as protojson accepts bytes.
func (d *decoder) payloadBase64(path string, prev []byte) ([]byte, error) {
	switch d.peek() {
	case 'n':
		d.skip()
		return prev, nil
	case '"':
	default:
		return nil, d.typeErr(path, "string")
	}
	raw, escaped := d.rawString()
	text := raw[1 : len(raw)-1]
	if escaped {
		text = []byte(unquote(raw))
	}
	if len(text) == 0 {
		return prev, nil
	}
	if len(prev) > 0 {
		return nil, badFrame(path, "payload given twice")
	}
	enc := base64.StdEncoding
	if bytes.ContainsAny(text, "-_") {
		enc = base64.URLEncoding
	}
	if len(text)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	p, err := enc.AppendDecode(nil, text)
	if err != nil {
		return nil, badFrame(path, "%v", err)
	}
	if len(p) == 0 {
		return prev, nil
	}
	return p, nil
}

// parseDigits parses up to 19 decimal digits without allocating; it
// returns false for anything else.
func parseDigits(s []byte) (uint64, bool) {
	if len(s) == 0 || len(s) > 19 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	var u uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	return u, true
}

// parseIntegral parses a JSON number with a fraction or exponent (1e3,
// 2.0) and reports whether it is an integer.
func parseIntegral(s []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil || f != math.Trunc(f) {
		return 0, false
	}
	return f, true
}

// isNumber reports whether s is a JSON number.
func isNumber(s []byte) bool {
	return numberEnd(s, 0) == len(s)
}

// numberEnd returns the end of the JSON number that starts at s[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(s []byte, i int) int {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(s []byte, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// uint32 reads an unsigned 32-bit integer.
func (d *decoder) uint32(path string) (uint32, error) {
	u, err := d.uint(path, 32)
	return uint32(u), err
}

// strList appends the strings of an array (or nothing for null) to dst.
func (d *decoder) strList(path string, dst []string) ([]string, error) {
	if ok, err := d.openArray(path); !ok {
		return dst, err
	}
	for d.nextElem() {
		s, err := d.str(path + "[" + strconv.Itoa(len(dst)) + "]")
		if err != nil {
			return dst, err
		}
		dst = append(dst, s)
	}
	return dst, nil
}

// openElem starts reading element n of the array of objects path.
func (d *decoder) openElem(path string, n int) error {
	if d.peek() != '{' {
		return d.typeErr(path+"["+strconv.Itoa(n)+"]", "object")
	}
	d.i++
	return nil
}

// elemErr puts the path of element n of the array path before the path
// of a decode error.
func elemErr(path string, n int, err error) error {
	return prefixErr(path+"["+strconv.Itoa(n)+"]", err)
}

// prefixErr puts the path of the object that was being read before the
// path of a decode error.
func prefixErr(path string, err error) error {
	if fe, ok := err.(*frameError); ok {
		if fe.path == "" {
			fe.path = path
		} else {
			fe.path = path + "." + fe.path
		}
	}
	return err
}
