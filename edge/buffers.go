package edge

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
)

// Buffer sizes of a client connection. net/http hands a hijacked
// connection a 4 KiB reader and a 4 KiB writer, which coder/websocket keeps
// for the connection's whole life: most of what an idle connection costs.
// corral's frames are small (a client frame is a hello, a join, a publish;
// a server message is one WebSocket write of one or a few frames), so:
//
//   - readBufferSize holds a frame header and a typical client frame; a
//     larger payload is read straight into its destination, as bufio does
//     for reads larger than its buffer.
//   - writeBufferSize holds a frame header plus a typical server message,
//     so that one message is one write(2). A larger message (a big batch)
//     costs a second write(2); they are rare and large, so the second
//     call is cheap next to the copy.
const (
	readBufferSize  = 1 << 10
	writeBufferSize = 2 << 10
)

// smallBuffers is the ResponseWriter handed to websocket.Accept: its Hijack
// gives the connection corral's smaller buffers instead of net/http's.
type smallBuffers struct {
	http.ResponseWriter
}

// Hijack hijacks the underlying connection and re-buffers it. Bytes the
// client sent past the upgrade request and net/http already read stay first
// in the new reader's buffer (coder/websocket takes them from there).
func (s smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 {
		if err := brw.Writer.Flush(); err != nil {
			nc.Close()
			return nil, nil, err
		}
	}
	var early []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		early = bytes.Clone(b)
	}
	// The early bytes must sit in the buffer itself, not only in the
	// reader behind it: coder/websocket keeps what is buffered and then
	// reads the net.Conn directly.
	var br *bufio.Reader
	if len(early) == 0 {
		br = bufio.NewReaderSize(nc, readBufferSize)
	} else {
		br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(early), nc), max(readBufferSize, len(early)))
		if _, err := br.Peek(len(early)); err != nil {
			nc.Close()
			return nil, nil, err
		}
	}
	return nc, bufio.NewReadWriter(br, bufio.NewWriterSize(nc, writeBufferSize)), nil
}
