package protocol

import corralv1 "github.com/corral-rt/corral/gen/corral/v1"

// The two implementations of corral.v1.json per-message code, for the
// differential tests in codec_diff_test.go: the hand-written one and the
// one protoc-gen-corral-json generates (client_json.pb.go).

var (
	HandAppendClient = appendClientJSON
	HandAppendServer = appendServerJSON
	HandDecodeClient = decodeClientJSON
	HandDecodeServer = decodeServerJSON
	GenAppendClient  = appendJSONClientFrame
	GenAppendServer  = appendJSONServerFrame
)

func GenDecodeClient(data []byte, dst *corralv1.ClientFrame) error {
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

func GenDecodeServer(data []byte, dst *corralv1.ServerFrame) error {
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
