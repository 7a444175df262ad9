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
//
//   - readBufferSize holds a frame header and a typical client frame (a
//     hello, a join, a publish); a larger payload is read straight into its
//     destination, as bufio does for reads larger than its buffer.
//   - controlBufferSize is coder/websocket's writer, which now carries only
//     control frames (close, pong: at most 2+125 bytes, so one write(2)
//     each): the edge frames its data messages itself and writes each one
//     to the socket in one call (see conn.writeLoop).
const (
	readBufferSize    = 1 << 10
	controlBufferSize = 256
)

// hijacker is the ResponseWriter handed to websocket.Accept: its Hijack
// gives the connection corral's smaller buffers instead of net/http's, and
// keeps the net.Conn for the edge's own data writes.
type hijacker struct {
	http.ResponseWriter
	nc net.Conn // set by Hijack
}

// Hijack hijacks the underlying connection and re-buffers it. Bytes the
// client sent past the upgrade request and net/http already read stay first
// in the new reader's buffer (coder/websocket takes them from there).
func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
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
	h.nc = nc
	return nc, bufio.NewReadWriter(br, bufio.NewWriterSize(nc, controlBufferSize)), nil
}
