package protocol_test

import (
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// The hot path: the server encodes each room message once per encoding.

func BenchmarkAppendServerJSONMessage(b *testing.B) {
	benchAppendServer(b, protocol.JSON)
}

func BenchmarkAppendServerProtoMessage(b *testing.B) {
	benchAppendServer(b, protocol.Proto)
}

func benchAppendServer(b *testing.B, enc protocol.Encoding) {
	f := sampleMessage()
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = protocol.AppendServer(enc, buf[:0], f)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeClientJSONPublish(b *testing.B) {
	benchDecodeClient(b, protocol.JSON)
}

func BenchmarkDecodeClientProtoPublish(b *testing.B) {
	benchDecodeClient(b, protocol.Proto)
}

func benchDecodeClient(b *testing.B, enc protocol.Encoding) {
	data, err := protocol.AppendClient(enc, nil, samplePublish())
	if err != nil {
		b.Fatal(err)
	}
	var f corralv1.ClientFrame
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := protocol.DecodeClient(enc, data, &f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeServerJSONBatch(b *testing.B) {
	benchDecodeServerBatch(b, protocol.JSON)
}

func BenchmarkDecodeServerProtoBatch(b *testing.B) {
	benchDecodeServerBatch(b, protocol.Proto)
}

// A batch of 16 messages, as a busy client receives them.
func benchDecodeServerBatch(b *testing.B, enc protocol.Encoding) {
	msg, err := protocol.AppendServer(enc, nil, sampleMessage())
	if err != nil {
		b.Fatal(err)
	}
	frames := make([][]byte, 16)
	for i := range frames {
		frames[i] = msg
	}
	data := protocol.AppendBatch(enc, nil, frames)
	var f corralv1.ServerFrame
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := protocol.DecodeServer(enc, data, &f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, enc := range encodings {
		b.Run(enc.String(), func(b *testing.B) {
			msg, err := protocol.AppendServer(enc, nil, sampleMessage())
			if err != nil {
				b.Fatal(err)
			}
			frames := [][]byte{msg, msg, msg, msg, msg, msg, msg, msg}
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				buf = protocol.AppendBatch(enc, buf[:0], frames)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
