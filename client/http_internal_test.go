package client

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/coder/websocket"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// FuzzHTTPCarrierNext reads a stream's response body of arbitrary bytes,
// as SSE events and as length-prefixed records: no panic, no message over
// the read limit, and it ends with an error at the end of the body.
func FuzzHTTPCarrierNext(f *testing.F) {
	f.Add([]byte("event: corral-open\ndata: {}\n\nid: 1\ndata: {\"pong\":{}}\n\n:\n\nevent: corral-close\ndata: {\"code\":4001}\n\n"), false)
	f.Add([]byte("data: a\ndata: b\r\n\r\n"), false)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 2, 0x42, 0}, true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, true)
	f.Fuzz(func(t *testing.T, body []byte, records bool) {
		h := &httpCarrier{kind: SSE, limit: 1 << 10, br: bufio.NewReaderSize(bytes.NewReader(body), 64)}
		if records {
			h.kind = HTTPStream
		}
		for range len(body) + 1 {
			p, err := h.next()
			if err != nil {
				return
			}
			if int64(len(p)) > h.limit+1 {
				t.Fatalf("a message of %d bytes, over the limit", len(p))
			}
		}
		t.Fatal("more messages than bytes")
	})
}

// TestHTTPCarrierNext: an SSE stream's events and its close, and a record
// stream's records, heartbeats skipped.
func TestHTTPCarrierNext(t *testing.T) {
	pong, _ := protocol.AppendServer(protocol.JSON, nil, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Id: 3}}})
	sse := "event: corral-open\ndata: {}\n\n:\n\nid: 1\ndata: " + string(pong) + "\n\nevent: corral-close\ndata: {\"code\":4001,\"reason\":\"slow\"}\n\n"
	h := &httpCarrier{kind: SSE, limit: 1 << 10, br: bufio.NewReader(bytes.NewReader([]byte(sse)))}
	if p, err := h.next(); err != nil || !bytes.Equal(p, pong) {
		t.Fatalf("next: %q %v, want the pong", p, err)
	}
	var ce websocket.CloseError
	if _, err := h.next(); !errors.As(err, &ce) || ce.Code != 4001 || ce.Reason != "slow" {
		t.Fatalf("next: %v, want the close 4001", err)
	}
	rec := []byte{0, 0, 0, 0, 0, 0, 0, byte(len(pong))}
	rec = append(rec, pong...)
	h = &httpCarrier{kind: HTTPStream, limit: 1 << 10, br: bufio.NewReader(bytes.NewReader(rec))}
	if p, err := h.next(); err != nil || !bytes.Equal(p, pong) {
		t.Fatalf("next: %q %v, want the pong", p, err)
	}
	if _, err := h.next(); !errors.Is(err, errStreamEnded) {
		t.Fatalf("next at the end: %v, want errStreamEnded", err)
	}
}
