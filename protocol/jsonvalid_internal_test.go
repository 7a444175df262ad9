package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// validJSON must agree with json.Valid and utf8.Valid together.

var validJSONCases = map[string]string{
	"empty":              ``,
	"space":              " \t\r\n",
	"object":             `{"a":[1,-2.5e+3,true,false,null,"x",{}],"b":{"c":[]}}`,
	"spaced":             " { \"a\" : [ 1 , 2 ] } ",
	"escapes":            `"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00 \ud800"`,
	"bad escape":         `"\x"`,
	"short unicode":      `"\u12"`,
	"bad hex":            `"\u12g4"`,
	"control char":       "\"\x01\"",
	"del":                "\"\x7f\"",
	"utf8":               `"é😀"`,
	"invalid utf8":       "\"\xff\"",
	"surrogate utf8":     "\"\xed\xa0\x80\"",
	"utf8 outside":       "\xc3\xa9",
	"unterminated":       `"abc`,
	"trailing comma":     `[1,]`,
	"object comma":       `{"a":1,}`,
	"missing colon":      `{"a" 1}`,
	"non-string key":     `{1:1}`,
	"two values":         `1 2`,
	"leading zero":       `01`,
	"minus zero":         `-0`,
	"plus":               `+1`,
	"fraction no digits": `1.`,
	"exponent no digits": `1e`,
	"exponent sign":      `1E-7`,
	"dot first":          `.5`,
	"minus alone":        `-`,
	"tru":                `tru`,
	"nul":                `nul`,
	"nulls":              `nullnull`,
	"true x":             `truex`,
	"unclosed":           `{"a":[1`,
	"close mismatch":     `[1}`,
	"nested":             `[[[[[]]]]]`,
	"nul byte":           "\x00",
}

func TestValidJSON(t *testing.T) {
	for name, in := range validJSONCases {
		t.Run(name, func(t *testing.T) {
			checkValidJSON(t, []byte(in))
		})
	}
}

func TestValidJSONDepth(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		checkValidJSON(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
		checkValidJSON(t, []byte(strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)))
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, in := range validJSONCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidJSON(t, b)
	})
}

func checkValidJSON(t *testing.T, b []byte) {
	t.Helper()
	want := json.Valid(b) && utf8.Valid(b)
	if got := validJSON(b); got != want {
		t.Fatalf("validJSON(%q) = %v, want %v", b, got, want)
	}
}
