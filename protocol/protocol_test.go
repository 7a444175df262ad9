package protocol_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

var encodings = []protocol.Encoding{protocol.JSON, protocol.Proto}

func TestEncodingOf(t *testing.T) {
	for _, enc := range encodings {
		got, ok := protocol.EncodingOf(enc.String())
		if !ok || got != enc {
			t.Errorf("EncodingOf(%q) = %v, %v", enc.String(), got, ok)
		}
	}
	if protocol.JSON.String() != "corral.v1.json" || protocol.Proto.String() != "corral.v1.proto" {
		t.Errorf("names: %q, %q", protocol.JSON, protocol.Proto)
	}
	if _, ok := protocol.EncodingOf("corral.v2.json"); ok {
		t.Error("EncodingOf accepted an unknown subprotocol")
	}
}

func TestClientRoundTrip(t *testing.T) {
	for name, f := range clientFrames() {
		for _, enc := range encodings {
			t.Run(name+"/"+enc.String(), func(t *testing.T) {
				prefix := []byte("prefix")
				b, err := protocol.AppendClient(enc, prefix, f)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(b, prefix) {
					t.Fatalf("AppendClient overwrote buf: %q", b)
				}
				got := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{}} // reset by decode
				if err := protocol.DecodeClient(enc, b[len(prefix):], got); err != nil {
					t.Fatalf("decode %q: %v", b[len(prefix):], err)
				}
				if !proto.Equal(got, f) {
					t.Errorf("round trip of %q:\n got %v\nwant %v", b[len(prefix):], got, f)
				}
			})
		}
	}
}

func TestServerRoundTrip(t *testing.T) {
	for name, f := range serverFrames() {
		for _, enc := range encodings {
			t.Run(name+"/"+enc.String(), func(t *testing.T) {
				b, err := protocol.AppendServer(enc, nil, f)
				if err != nil {
					t.Fatal(err)
				}
				var got corralv1.ServerFrame
				if err := protocol.DecodeServer(enc, b, &got); err != nil {
					t.Fatalf("decode %q: %v", b, err)
				}
				if !proto.Equal(&got, f) {
					t.Errorf("round trip of %q:\n got %v\nwant %v", b, &got, f)
				}
			})
		}
	}
}

// The JSON wire format, pinned.
func TestJSONGolden(t *testing.T) {
	clients := clientFrames()
	servers := serverFrames()
	tests := map[string]struct {
		client *corralv1.ClientFrame
		server *corralv1.ServerFrame
		want   string
	}{
		"publish": {
			client: clients["publish"],
			want:   `{"publish":{"room":"a","id":"c1","payload":{"text":"hi"}}}`,
		},
		"publish binary": {
			client: clients["publish binary"],
			want:   `{"publish":{"room":"a","id":"c2","payloadBase64":"AAH/"}}`,
		},
		"hello resume": {
			client: clients["hello resume"],
			want: `{"hello":{"token":"t","resume":{"sessionId":"s1","resumeToken":"rt",` +
				`"rooms":[{"room":"a","seq":7,"epoch":"e1"},{"room":"b"}]}}}`,
		},
		"signal clear": {
			client: clients["signal clear"],
			want:   `{"signal":{"room":"a","key":"typing:u1","clear":true}}`,
		},
		"ping empty": {
			client: clients["ping empty"],
			want:   `{"ping":{}}`,
		},
		"message": {
			server: servers["message"],
			want: `{"message":{"room":"a","seq":7,"sender":"u1","payload":{"text":"hi"},` +
				`"timeMs":1700000000000,"id":"c1"}}`,
		},
		"message sender info": {
			server: servers["message sender info"],
			want:   `{"message":{"room":"a","seq":2,"sender":"u1","payload":1,"senderInfo":{"name":"Ann"}}}`,
		},
		"presence info": {
			server: servers["presence info"],
			want: `{"presence":{"room":"lobby","joins":[{"userId":"ann","connections":1,"info":{"name":"Ann"}},` +
				`{"userId":"ben","connections":1,"infoBase64":"AQ=="}],"members":2,"connections":2}}`,
		},
		"message max": {
			server: servers["message max"],
			want:   `{"message":{"seq":18446744073709551615,"payload":"a string","timeMs":-9223372036854775808}}`,
		},
		"welcome": {
			server: servers["welcome"],
			want: `{"welcome":{"sessionId":"s1","resumeToken":"rt","userId":"u1","resumed":true,` +
				`"heartbeatMs":25000,"sessionTtlMs":120000,"expiresUnix":1700003600}}`,
		},
		"refresh": {
			client: clients["refresh"],
			want:   `{"refresh":{"token":"eyJhbGciOiJIUzI1NiJ9.e30.sig"}}`,
		},
		"refresh empty": {
			client: clients["refresh empty"],
			want:   `{"refresh":{}}`,
		},
		"refreshed": {
			server: servers["refreshed"],
			want:   `{"refreshed":{"expiresUnix":1700007200}}`,
		},
		"refreshed never": {
			server: servers["refreshed never"],
			want:   `{"refreshed":{}}`,
		},
		"error": {
			server: servers["error"],
			want: `{"error":{"code":4101,"message":"slow down","room":"a","ref":"c1",` +
				`"retryAfterMs":200}}`,
		},
		"left": {
			server: servers["left"],
			want:   `{"left":{"room":"a","code":4403,"reason":"kicked"}}`,
		},
		"batch": {
			server: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{
				Frames: []*corralv1.ServerFrame{servers["pong"], servers["batch empty"]},
			}}},
			want: `{"batch":{"frames":[{"pong":{"id":3,"timeMs":1700000000000}},{"batch":{}}]}}`,
		},
		"string escapes": {
			server: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
				Message: "q\" b\\ n\n r\r t\t nul\x00 esc\x1b del\x7f é 😀 \u2028\u2029 </script>",
			}}},
			want: `{"error":{"message":"q\" b\\ n\n r\r t\t nul\u0000 esc\u001b del` + "\x7f" +
				` é 😀 \u2028\u2029 </script>"}}`,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var b []byte
			var err error
			if tt.client != nil {
				b, err = protocol.AppendClient(protocol.JSON, nil, tt.client)
			} else {
				b, err = protocol.AppendServer(protocol.JSON, nil, tt.server)
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
			// The golden text decodes back to the frame.
			if tt.client != nil {
				var got corralv1.ClientFrame
				if err := protocol.DecodeClient(protocol.JSON, []byte(tt.want), &got); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(&got, tt.client) {
					t.Errorf("decoded %v, want %v", &got, tt.client)
				}
			} else {
				var got corralv1.ServerFrame
				if err := protocol.DecodeServer(protocol.JSON, []byte(tt.want), &got); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(&got, tt.server) {
					t.Errorf("decoded %v, want %v", &got, tt.server)
				}
			}
		})
	}
}

// Strings with invalid UTF-8 are written with U+FFFD in JSON and refused in
// proto, whose strings must be valid UTF-8.
func TestEncodeInvalidUTF8(t *testing.T) {
	f := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{Room: "a\xffb\xc3"}}}
	b, err := protocol.AppendServer(protocol.JSON, nil, f)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"left":{"room":"a\ufffdb\ufffd"}}`; string(b) != want {
		t.Errorf("JSON: got %s, want %s", b, want)
	}
	if _, err := protocol.AppendServer(protocol.Proto, nil, f); !errors.Is(err, protocol.ErrBadFrame) {
		t.Errorf("proto: got %v, want ErrBadFrame", err)
	}
}

func TestEncodeNoKind(t *testing.T) {
	for _, enc := range encodings {
		if _, err := protocol.AppendServer(enc, nil, &corralv1.ServerFrame{}); !errors.Is(err, protocol.ErrUnknownFrame) {
			t.Errorf("AppendServer(%v, no kind): got %v, want ErrUnknownFrame", enc, err)
		}
		if _, err := protocol.AppendClient(enc, nil, nil); !errors.Is(err, protocol.ErrUnknownFrame) {
			t.Errorf("AppendClient(%v, nil): got %v, want ErrUnknownFrame", enc, err)
		}
	}
}

func TestInvalidEncoding(t *testing.T) {
	const bad = protocol.Encoding(9)
	if bad.String() != "Encoding(9)" {
		t.Errorf("String() = %q", bad.String())
	}
	if err := protocol.DecodeClient(bad, []byte("{}"), new(corralv1.ClientFrame)); err == nil {
		t.Error("DecodeClient accepted an invalid encoding")
	}
	if _, err := protocol.AppendServer(bad, nil, sampleMessage()); err == nil {
		t.Error("AppendServer accepted an invalid encoding")
	}
	defer func() {
		if recover() == nil {
			t.Error("AppendBatch did not panic on an invalid encoding")
		}
	}()
	protocol.AppendBatch(bad, nil, nil)
}

// Payloads: kept byte for byte in both encodings, inline in JSON when that
// reads back the same, base64 otherwise.
func TestPayload(t *testing.T) {
	tests := map[string]struct {
		payload []byte
		inline  bool
	}{
		"object":          {[]byte(`{"a":[1,2,{"b":null}]}`), true},
		"string":          {[]byte(`"hi"`), true},
		"number":          {[]byte(`-1.5e3`), true},
		"true":            {[]byte(`true`), true},
		"inner space":     {[]byte(`{ "a" : 1 }`), true},
		"escapes":         {[]byte(`"\u2028\ud800"`), true},
		"null":            {[]byte(`null`), false},
		"outer space":     {[]byte(` {"a":1}`), false},
		"trailing space":  {[]byte(`1 `), false},
		"binary":          {[]byte{0, 1, 2, 0xff}, false},
		"not json":        {[]byte(`hello`), false},
		"two values":      {[]byte(`1 2`), false},
		"invalid utf8":    {[]byte("\"\xff\""), false},
		"truncated":       {[]byte(`{"a":`), false},
		"single byte":     {[]byte(`7`), true},
		"single bad byte": {[]byte(`x`), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
				Payload: tt.payload,
			}}}
			b, err := protocol.AppendClient(protocol.JSON, nil, f)
			if err != nil {
				t.Fatal(err)
			}
			if inline := bytes.Contains(b, []byte(`"payload":`)); inline != tt.inline {
				t.Errorf("%s: inline = %v, want %v", b, inline, tt.inline)
			}
			var got corralv1.ClientFrame
			if err := protocol.DecodeClient(protocol.JSON, b, &got); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if p := got.GetPublish().GetPayload(); !bytes.Equal(p, tt.payload) {
				t.Errorf("%s: payload %q, want %q", b, p, tt.payload)
			}
		})
	}
}

// JSON that clients may send beyond what the encoder writes.
func TestDecodeJSONAccepts(t *testing.T) {
	tests := map[string]struct {
		in   string
		want proto.Message
	}{
		"numeric strings": {
			in:   `{"join":{"room":"a","sinceSeq":"9007199254740993"}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "a", SinceSeq: 9007199254740993}}},
		},
		"exponent": {
			in:   `{"ack":{"seq":1.5e3}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Seq: 1500}}},
		},
		"exponent string": {
			in:   `{"ack":{"seq":"2E2"}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Seq: 200}}},
		},
		"max uint64": {
			in:   `{"ping":{"id":18446744073709551615}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: 1<<64 - 1}}},
		},
		"proto names": {
			in: `{"hello":{"resume":{"session_id":"s","resume_token":"r"}}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
				Resume: &corralv1.Resume{SessionId: "s", ResumeToken: "r"},
			}}},
		},
		"nulls": {
			in:   `{"hello":{"token":null,"resume":null},"join":null}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{}}},
		},
		"null payload": {
			in:   `{"publish":{"room":"a","payload":null}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "a"}}},
		},
		"unknown fields": {
			in:   `{"v":2,"leave":{"room":"a","extra":{"deep":[1,"}",{"x":null}]}},"later":true}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "a"}}},
		},
		"white space": {
			in: " \t\n{ \"publish\" : { \"room\" : \"a\" , \"payload\" : { \"x\" : [ 1 , 2 ] } } }\r\n",
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
				Room: "a", Payload: []byte(`{ "x" : [ 1 , 2 ] }`),
			}}},
		},
		"escapes": {
			in: `{"\u0073ignal":{"\u0072oom":"a\"\u00e9\ud83d\ude00","key":"\ud800","clear":true}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{
				Room: "a\"é😀", Key: "\ufffd", Clear: true,
			}}},
		},
		"payloadBase64 url unpadded": {
			in:   `{"publish":{"payloadBase64":"_-8"}}`,
			want: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Payload: []byte{0xff, 0xef}}}},
		},
		"code name": {
			in:   `{"error":{"code":"CODE_SLOW_CONSUMER"}}`,
			want: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: corralv1.Code_CODE_SLOW_CONSUMER}}},
		},
		"negative time": {
			in:   `{"pong":{"timeMs":"-5"}}`,
			want: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{TimeMs: -5}}},
		},
		"batch keeps unknown kinds": {
			in: `{"batch":{"frames":[{"future":{}},{"pong":{"id":1}}]}}`,
			want: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{
				Frames: []*corralv1.ServerFrame{{}, {Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Id: 1}}}},
			}}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var got proto.Message
			var err error
			switch tt.want.(type) {
			case *corralv1.ClientFrame:
				var f corralv1.ClientFrame
				err = protocol.DecodeClient(protocol.JSON, []byte(tt.in), &f)
				got = &f
			case *corralv1.ServerFrame:
				var f corralv1.ServerFrame
				err = protocol.DecodeServer(protocol.JSON, []byte(tt.in), &f)
				got = &f
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	publish, _ := protocol.AppendClient(protocol.Proto, nil, samplePublish())
	message, _ := protocol.AppendServer(protocol.Proto, nil, sampleMessage())
	unknownField := protowire.AppendTag(nil, 99, protowire.VarintType)
	unknownField = protowire.AppendVarint(unknownField, 1)
	badUTF8 := protowire.AppendTag(nil, 3, protowire.BytesType) // leave
	badUTF8 = protowire.AppendBytes(badUTF8, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff}))

	tests := map[string]struct {
		enc    protocol.Encoding
		server bool
		in     string
		want   error
		msg    string // a part of the error message
	}{
		"json garbage":            {enc: protocol.JSON, in: "\x00\x01garbage", want: protocol.ErrBadFrame, msg: "invalid JSON"},
		"json empty":              {enc: protocol.JSON, in: "", want: protocol.ErrBadFrame},
		"json truncated":          {enc: protocol.JSON, in: `{"join":{"room":"a"`, want: protocol.ErrBadFrame},
		"json array":              {enc: protocol.JSON, in: `[]`, want: protocol.ErrBadFrame, msg: "want object, got array"},
		"json string":             {enc: protocol.JSON, in: `"join"`, want: protocol.ErrBadFrame},
		"json null":               {enc: protocol.JSON, in: `null`, want: protocol.ErrBadFrame},
		"json empty object":       {enc: protocol.JSON, in: `{}`, want: protocol.ErrUnknownFrame},
		"json unknown kind":       {enc: protocol.JSON, in: `{"nope":{}}`, want: protocol.ErrUnknownFrame},
		"json server kind":        {enc: protocol.JSON, in: `{"welcome":{}}`, want: protocol.ErrUnknownFrame},
		"json case matters":       {enc: protocol.JSON, in: `{"Join":{}}`, want: protocol.ErrUnknownFrame},
		"json two kinds":          {enc: protocol.JSON, in: `{"join":{"room":"a"},"leave":{"room":"a"}}`, want: protocol.ErrBadFrame, msg: "more than one kind"},
		"json same kind twice":    {enc: protocol.JSON, in: `{"ping":{},"ping":{}}`, want: protocol.ErrBadFrame},
		"json kind not object":    {enc: protocol.JSON, in: `{"join":"a"}`, want: protocol.ErrBadFrame},
		"json room number":        {enc: protocol.JSON, in: `{"join":{"room":5}}`, want: protocol.ErrBadFrame, msg: "join.room: want string, got number"},
		"json seq bool":           {enc: protocol.JSON, in: `{"ack":{"seq":true}}`, want: protocol.ErrBadFrame},
		"json seq negative":       {enc: protocol.JSON, in: `{"ack":{"seq":-1}}`, want: protocol.ErrBadFrame},
		"json seq fraction":       {enc: protocol.JSON, in: `{"ack":{"seq":1.5}}`, want: protocol.ErrBadFrame},
		"json seq too big":        {enc: protocol.JSON, in: `{"ack":{"seq":18446744073709551616}}`, want: protocol.ErrBadFrame},
		"json seq bad string":     {enc: protocol.JSON, in: `{"ack":{"seq":"0x10"}}`, want: protocol.ErrBadFrame},
		"json seq spaced string":  {enc: protocol.JSON, in: `{"ack":{"seq":" 1"}}`, want: protocol.ErrBadFrame},
		"json clear string":       {enc: protocol.JSON, in: `{"signal":{"clear":"true"}}`, want: protocol.ErrBadFrame},
		"json rooms object":       {enc: protocol.JSON, in: `{"hello":{"resume":{"rooms":{}}}}`, want: protocol.ErrBadFrame},
		"json rooms null element": {enc: protocol.JSON, in: `{"hello":{"resume":{"rooms":[null]}}}`, want: protocol.ErrBadFrame},
		"json resume string":      {enc: protocol.JSON, in: `{"hello":{"resume":"s"}}`, want: protocol.ErrBadFrame},
		"json invalid payload":    {enc: protocol.JSON, in: `{"publish":{"room":"a","payload":{text:"hi"}}}`, want: protocol.ErrBadFrame, msg: "invalid JSON"},
		"json payload twice":      {enc: protocol.JSON, in: `{"publish":{"payload":1,"payloadBase64":"AA=="}}`, want: protocol.ErrBadFrame},
		"json bad base64":         {enc: protocol.JSON, in: `{"publish":{"payloadBase64":"!!!"}}`, want: protocol.ErrBadFrame},
		"json base64 not string":  {enc: protocol.JSON, in: `{"publish":{"payloadBase64":[1]}}`, want: protocol.ErrBadFrame},
		"json invalid utf8":       {enc: protocol.JSON, in: "{\"join\":{\"room\":\"\xff\"}}", want: protocol.ErrBadFrame, msg: "UTF-8"},
		"json uint32 overflow":    {enc: protocol.JSON, server: true, in: `{"welcome":{"heartbeatMs":4294967296}}`, want: protocol.ErrBadFrame},
		"json unknown code name":  {enc: protocol.JSON, server: true, in: `{"error":{"code":"CODE_NOPE"}}`, want: protocol.ErrBadFrame},
		"json code overflow":      {enc: protocol.JSON, server: true, in: `{"error":{"code":2147483648}}`, want: protocol.ErrBadFrame},
		"json client kind":        {enc: protocol.JSON, server: true, in: `{"publish":{}}`, want: protocol.ErrUnknownFrame},
		"json frames not array":   {enc: protocol.JSON, server: true, in: `{"batch":{"frames":{}}}`, want: protocol.ErrBadFrame},
		"json frame not object":   {enc: protocol.JSON, server: true, in: `{"batch":{"frames":[1]}}`, want: protocol.ErrBadFrame},
		"json bad nested frame":   {enc: protocol.JSON, server: true, in: `{"batch":{"frames":[{"pong":{}},{"pong":{"id":"x"}}]}}`, want: protocol.ErrBadFrame, msg: "batch.frames[1].pong.id"},
		"proto garbage":           {enc: protocol.Proto, in: "\xff\xff\xff\xff", want: protocol.ErrBadFrame},
		"proto truncated":         {enc: protocol.Proto, in: string(publish[:len(publish)-3]), want: protocol.ErrBadFrame},
		"proto truncated server":  {enc: protocol.Proto, server: true, in: string(message[:len(message)-1]), want: protocol.ErrBadFrame},
		"proto empty":             {enc: protocol.Proto, in: "", want: protocol.ErrUnknownFrame},
		"proto no kind":           {enc: protocol.Proto, in: string(unknownField), want: protocol.ErrUnknownFrame},
		"proto no kind server":    {enc: protocol.Proto, server: true, in: string(unknownField), want: protocol.ErrUnknownFrame},
		"proto invalid utf8":      {enc: protocol.Proto, in: string(badUTF8), want: protocol.ErrBadFrame},
		"proto json bytes":        {enc: protocol.Proto, in: `{"ping":{}}`, want: protocol.ErrBadFrame},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			if tt.server {
				f := serverFrames()["message"]
				err = protocol.DecodeServer(tt.enc, []byte(tt.in), f)
				if err != nil && f.Kind != nil {
					t.Error("dst not reset after a failed decode")
				}
			} else {
				f := samplePublish()
				err = protocol.DecodeClient(tt.enc, []byte(tt.in), f)
				if err != nil && f.Kind != nil {
					t.Error("dst not reset after a failed decode")
				}
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

func TestAppendBatch(t *testing.T) {
	servers := serverFrames()
	tests := map[string][]*corralv1.ServerFrame{
		"none":         nil,
		"one":          {servers["message"]},
		"mixed":        {servers["message"], servers["message binary"], servers["signal"], servers["published"], servers["pong"], servers["error"]},
		"nested":       {servers["batch"], servers["welcome"]},
		"empty nested": {{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{}}}, servers["pong"]},
	}
	for name, frames := range tests {
		for _, enc := range encodings {
			t.Run(name+"/"+enc.String(), func(t *testing.T) {
				var encoded [][]byte
				for _, f := range frames {
					b, err := protocol.AppendServer(enc, nil, f)
					if err != nil {
						t.Fatal(err)
					}
					encoded = append(encoded, b)
				}
				prefix := []byte("prefix")
				b := protocol.AppendBatch(enc, prefix, encoded)
				if !bytes.HasPrefix(b, prefix) {
					t.Fatalf("AppendBatch overwrote buf: %q", b)
				}
				b = b[len(prefix):]
				var got corralv1.ServerFrame
				if err := protocol.DecodeServer(enc, b, &got); err != nil {
					t.Fatalf("decode %q: %v", b, err)
				}
				// A batch among the frames is spliced in: its frames join
				// the result (one level; clients never see nesting that
				// AppendBatch made).
				var flat []*corralv1.ServerFrame
				for _, f := range frames {
					if b := f.GetBatch(); b != nil {
						flat = append(flat, b.GetFrames()...)
						continue
					}
					flat = append(flat, f)
				}
				want := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: flat}}}
				if !proto.Equal(&got, want) {
					t.Errorf("got %v\nwant %v", &got, want)
				}
				// Splicing writes what encoding the whole batch writes.
				whole, err := protocol.AppendServer(enc, nil, want)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b, whole) {
					t.Errorf("spliced %q\n  whole %q", b, whole)
				}
			})
		}
	}
}

// In a batch, a frame of a kind unknown to this version is kept without a
// kind instead of failing the batch.
func TestBatchKeepsUnknownKinds(t *testing.T) {
	pong := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Id: 1}}}
	unknown := map[protocol.Encoding][]byte{
		protocol.JSON:  []byte(`{"future":{"x":1}}`),
		protocol.Proto: protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1),
	}
	for _, enc := range encodings {
		t.Run(enc.String(), func(t *testing.T) {
			p, err := protocol.AppendServer(enc, nil, pong)
			if err != nil {
				t.Fatal(err)
			}
			var got corralv1.ServerFrame
			if err := protocol.DecodeServer(enc, protocol.AppendBatch(enc, nil, [][]byte{unknown[enc], p}), &got); err != nil {
				t.Fatal(err)
			}
			frames := got.GetBatch().GetFrames()
			if len(frames) != 2 || frames[0].GetKind() != nil || !proto.Equal(frames[1], pong) {
				t.Errorf("got %v, want [no kind, %v]", frames, pong)
			}
		})
	}
}

func TestAdvice(t *testing.T) {
	tests := map[string]struct {
		code corralv1.Code
		want protocol.Advice
	}{
		"unspecified":        {corralv1.Code_CODE_UNSPECIFIED, protocol.AdviceStop},
		"going away":         {corralv1.Code_CODE_GOING_AWAY, protocol.AdviceResume},
		"slow consumer":      {corralv1.Code_CODE_SLOW_CONSUMER, protocol.AdviceResume},
		"session taken over": {corralv1.Code_CODE_SESSION_TAKEN_OVER, protocol.AdviceResume},
		"last resume":        {4099, protocol.AdviceResume},
		"overloaded":         {corralv1.Code_CODE_OVERLOADED, protocol.AdviceRetry},
		"session expired":    {corralv1.Code_CODE_SESSION_EXPIRED, protocol.AdviceRetry},
		"backlog full":       {corralv1.Code_CODE_BACKLOG_FULL, protocol.AdviceRetry},
		"out of order":       {corralv1.Code_CODE_OUT_OF_ORDER, protocol.AdviceRetry},
		"last retry":         {4199, protocol.AdviceRetry},
		"gap":                {4200, protocol.AdviceStop},
		"bad frame":          {corralv1.Code_CODE_BAD_FRAME, protocol.AdviceStop},
		"too large":          {corralv1.Code_CODE_TOO_LARGE, protocol.AdviceStop},
		"websocket normal":   {1000, protocol.AdviceStop},
		"below range":        {3999, protocol.AdviceStop},
		"negative":           {-4000, protocol.AdviceStop},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := protocol.AdviceOf(tt.code); got != tt.want {
				t.Errorf("AdviceOf(%d) = %v, want %v", tt.code, got, tt.want)
			}
		})
	}
	for a, want := range map[protocol.Advice]string{
		protocol.AdviceStop: "stop", protocol.AdviceResume: "resume", protocol.AdviceRetry: "retry", 7: "Advice(7)",
	} {
		if a.String() != want {
			t.Errorf("Advice(%d).String() = %q, want %q", a, a.String(), want)
		}
	}
}

// Every code in the enum falls in a documented range.
func TestEveryCodeHasARange(t *testing.T) {
	for n, name := range corralv1.Code_name {
		c := corralv1.Code(n)
		if c == corralv1.Code_CODE_UNSPECIFIED {
			continue
		}
		if !(c >= 4000 && c <= 4199 || c >= 4400 && c <= 4499) {
			t.Errorf("%s (%d) is outside the documented ranges", name, n)
		}
	}
}
