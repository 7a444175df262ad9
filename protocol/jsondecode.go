package protocol

import (
	"unicode/utf8"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Decoding of the corral.v1.json subprotocol. A message is first checked
// whole by validJSON (jsonvalid.go); then the decoder (jsonscan.go) walks
// it relying on valid syntax, and the generated read methods
// (client_json.pb.go) map members to fields with the helpers below.

func decodeClientJSON(data []byte, dst *corralv1.ClientFrame) error {
	dst.Reset()
	if err := checkJSON(data); err != nil {
		return err
	}
	d := decoder{b: data}
	if d.peek() != '{' {
		return d.typeErr("frame", "object")
	}
	d.i++
	if err := d.readClientFrame(dst); err != nil {
		dst.Reset()
		return err
	}
	if dst.Kind == nil {
		return unknownFrame("no known kind in JSON object")
	}
	return nil
}

func decodeServerJSON(data []byte, dst *corralv1.ServerFrame) error {
	dst.Reset()
	if err := checkJSON(data); err != nil {
		return err
	}
	d := decoder{b: data}
	if d.peek() != '{' {
		return d.typeErr("frame", "object")
	}
	d.i++
	if err := d.readServerFrame(dst); err != nil {
		dst.Reset()
		return err
	}
	if dst.Kind == nil {
		return unknownFrame("no known kind in JSON object")
	}
	return nil
}

func checkJSON(data []byte) error {
	if !validJSON(data) {
		if !utf8.Valid(data) {
			return badFrame("", "invalid UTF-8")
		}
		return badFrame("", "invalid JSON")
	}
	return nil
}

// openKind starts reading the value of a kind member. It returns false for
// null (a kind not set) and an error when another kind was set already or
// the value is not an object.
func (d *decoder) openKind(key []byte, haveKind bool) (bool, error) {
	switch d.peek() {
	case 'n':
		d.skip()
		return false, nil
	case '{':
		if haveKind {
			return false, badFrame(string(key), "more than one kind in JSON object")
		}
		d.i++
		return true, nil
	}
	return false, d.typeErr(string(key), "object")
}

// openObject starts reading an object value; it returns false for null.
func (d *decoder) openObject(path string) (bool, error) {
	switch d.peek() {
	case 'n':
		d.skip()
		return false, nil
	case '{':
		d.i++
		return true, nil
	}
	return false, d.typeErr(path, "object")
}

// openArray is openObject for an array: false (and no error) for null.
func (d *decoder) openArray(path string) (bool, error) {
	switch d.peek() {
	case 'n':
		d.skip()
		return false, nil
	case '[':
		d.i++
		return true, nil
	}
	return false, d.typeErr(path, "array")
}
