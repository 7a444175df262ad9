package protocol_test

import (
	"errors"
	"regexp"
	"testing"

	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// The generated per-message code (client_json.pb.go) must write the same
// bytes as the hand-written code it replaces and accept exactly what it
// accepts, decoding to the same frames and failing with the same errors.

func TestGeneratedEncodesSame(t *testing.T) {
	for name, f := range clientFrames() {
		if got, want := protocol.GenAppendClient(nil, f), protocol.HandAppendClient(nil, f); string(got) != string(want) {
			t.Errorf("client %s: generated %s\nhand      %s", name, got, want)
		}
	}
	for name, f := range serverFrames() {
		if got, want := protocol.GenAppendServer(nil, f), protocol.HandAppendServer(nil, f); string(got) != string(want) {
			t.Errorf("server %s: generated %s\nhand      %s", name, got, want)
		}
	}
}

func TestGeneratedDecodesSame(t *testing.T) {
	var inputs []string
	for _, f := range clientFrames() {
		inputs = append(inputs, string(protocol.HandAppendClient(nil, f)))
	}
	for _, f := range serverFrames() {
		inputs = append(inputs, string(protocol.HandAppendServer(nil, f)))
	}
	inputs = append(inputs, jsonGarbage...)
	inputs = append(inputs, diffInputs...)
	for _, in := range inputs {
		diffDecode(t, []byte(in))
	}
}

// diffInputs are edge cases of the decoders beyond the fuzz seeds.
var diffInputs = []string{
	`{"hello":{"resume":{"rooms":[{"room":"a"},null]}}}`,
	`{"hello":{"resume":{"rooms":[{"seq":"x"}]}}}`,
	`{"hello":{"resume":null,"token":null}}`,
	`{"hello":{"resume":{"rooms":[{"room":"a"}],"rooms":[{"room":"b"}]}}}`,
	`{"join":{"presence_state":{"a":1},"presenceStateBase64":"AA=="}}`,
	`{"join":{"presenceStateBase64":"","presence_state":null,"from_position":true}}`,
	`{"set_presence":{"state_base64":"_-8"}}`,
	`{"presenceQuery":{"limit":4294967296}}`,
	`{"presence":{"leaves":["a",1]}}`,
	`{"presence":{"leaves":null,"joins":[{"user_id":"u","state":[1]}],"joins":[{"connections":"2"}]}}`,
	`{"presencePage":{"members":[{"stateBase64":"!"}]}}`,
	`{"presence_page":{"members":{}}}`,
	`{"welcome":{"heartbeat_ms":1e3,"expires_unix":-1,"session_ttl_ms":"7"}}`,
	`{"left":{"code":"CODE_FORBIDDEN"},"left":null}`,
	`{"reconnect":{"code":4001.0,"delay_ms":-1}}`,
	`{"error":{"code":"x"}}`,
	`{"batch":{"frames":[{"batch":{"frames":[{"pong":{"id":true}}]}}]}}`,
	`{"batch":{"frames":null,"frames":[{}]}}`,
	`{"batch":null,"pong":{}}`,
	`{"replay_end":{"seq":1},"replayEnd":{}}`,
	`{"refreshed":{"expires_unix":"9223372036854775808"}}`,
	`{"message":{"payload":1,"payload":2}}`,
	`{"signal":{"payload":{},"payload_base64":null,"clear":null}}`,
	` {"ping" : {"id" : 1 } } `,
}

// diffDecode decodes data as a client frame and as a server frame with
// both implementations and fails on any difference; what both accept must
// also re-encode the same.
func diffDecode(t *testing.T, data []byte) {
	t.Helper()
	var hc, gc corralv1.ClientFrame
	he, ge := protocol.HandDecodeClient(data, &hc), protocol.GenDecodeClient(data, &gc)
	sameResult(t, "client", data, he, ge, &hc, &gc)
	if he == nil && ge == nil {
		if h, g := protocol.HandAppendClient(nil, &hc), protocol.GenAppendClient(nil, &gc); string(h) != string(g) {
			t.Errorf("client %q re-encodes differently:\nhand      %s\ngenerated %s", data, h, g)
		}
	}
	var hs, gs corralv1.ServerFrame
	he, ge = protocol.HandDecodeServer(data, &hs), protocol.GenDecodeServer(data, &gs)
	sameResult(t, "server", data, he, ge, &hs, &gs)
	if he == nil && ge == nil {
		if h, g := protocol.HandAppendServer(nil, &hs), protocol.GenAppendServer(nil, &gs); string(h) != string(g) {
			t.Errorf("server %q re-encodes differently:\nhand      %s\ngenerated %s", data, h, g)
		}
	}
}

// listIndex is the one known difference in error text: the hand decoder
// named an element of a resume's rooms or a presence's leaves rooms[] and
// leaves[], the generated one gives its index as it does everywhere.
var listIndex = regexp.MustCompile(`(rooms|leaves)\[\d+\]`)

func sameResult(t *testing.T, side string, data []byte, he, ge error, h, g proto.Message) {
	t.Helper()
	if (he == nil) != (ge == nil) {
		t.Errorf("%s %q: hand error %v, generated error %v", side, data, he, ge)
		return
	}
	if he != nil {
		if errors.Is(he, protocol.ErrBadFrame) != errors.Is(ge, protocol.ErrBadFrame) ||
			listIndex.ReplaceAllString(ge.Error(), "$1[]") != he.Error() {
			t.Errorf("%s %q: hand error %q, generated error %q", side, data, he, ge)
		}
		return
	}
	if !proto.Equal(h, g) {
		t.Errorf("%s %q: hand decodes to %v, generated to %v", side, data, h, g)
	}
}

// FuzzGeneratedJSON is the differential fuzz target: the generated and the
// hand-written codec must agree on every input.
func FuzzGeneratedJSON(f *testing.F) {
	for _, c := range clientFrames() {
		f.Add(protocol.HandAppendClient(nil, c))
	}
	for _, s := range serverFrames() {
		f.Add(protocol.HandAppendServer(nil, s))
	}
	for _, s := range jsonGarbage {
		f.Add([]byte(s))
	}
	for _, s := range diffInputs {
		f.Add([]byte(s))
	}
	f.Fuzz(diffDecode)
}
