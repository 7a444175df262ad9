package api

import (
	"strings"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// Rooms' page token carries the last name of the page, and a token the
// server did not make is refused.
func TestRoomsPageToken(t *testing.T) {
	for _, name := range []string{"a", "game:1", "ünïcode"} {
		if got, err := decodePageToken(encodePageToken(name)); err != nil || got != name {
			t.Errorf("%q: round trip %q, %v", name, got, err)
		}
	}
	for _, tok := range []string{"!!", "=", strings.Repeat("A", 2000)} {
		if _, err := decodePageToken(tok); err == nil {
			t.Errorf("token %q accepted", tok)
		}
	}
}

// FuzzDecodeControl: a command from the control bus (bytes another
// process wrote to Redis) never panics the decoder, and what decodes
// re-encodes to a command that decodes the same.
func FuzzDecodeControl(f *testing.F) {
	sub, _ := proto.Marshal(&corralv1.SubscribeRequest{UserId: "u", Rooms: []string{"a"}, Since: []*corralv1.RoomPosition{{Room: "a", Seq: 3}}})
	unsub, _ := proto.Marshal(&corralv1.UnsubscribeRequest{UserId: "u", Rooms: []string{"a"}, Reason: "r"})
	f.Add(append([]byte{controlSubscribe}, sub...))
	f.Add(append([]byte{controlUnsubscribe}, unsub...))
	f.Add([]byte{})
	f.Add([]byte("x\xff\xff"))
	f.Fuzz(func(t *testing.T, cmd []byte) {
		m, err := decodeControl(cmd)
		if err != nil {
			return
		}
		raw, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeControl(append([]byte{cmd[0]}, raw...))
		if err != nil || !proto.Equal(m, again) {
			t.Fatalf("re-decoded %v, %v; want %v", again, err, m)
		}
	})
}
