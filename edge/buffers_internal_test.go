package edge

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzSock: whatever the sizes of the socket's reads and of the caller's,
// sock delivers the stream unchanged, early bytes first, and holds no
// borrowed buffer once everything is read.
func FuzzSock(f *testing.F) {
	f.Add([]byte("early"), []byte("hello, world"), []byte{1, 2, 3})
	f.Add([]byte(nil), bytes.Repeat([]byte("x"), 3000), []byte{16, 200, 5})
	f.Add([]byte("e"), bytes.Repeat([]byte("y"), 2*readBufferSize+1), []byte{255, 0, 1})
	f.Fuzz(func(t *testing.T, early, data, sizes []byte) {
		if len(sizes) == 0 {
			sizes = []byte{7}
		}
		s := &sock{Conn: &chunked{data: data, sizes: sizes}, early: bytes.Clone(early)}
		var got []byte
		for i := 0; ; i++ {
			// Read sizes from 1 byte to past readBufferSize.
			p := make([]byte, 1+int(sizes[i%len(sizes)])*9)
			n, err := s.Read(p)
			got = append(got, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if want := append(bytes.Clone(early), data...); !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes, want %d", len(got), len(want))
		}
		if !s.idle() || s.buf != nil {
			t.Fatal("sock holds bytes or a buffer after the end")
		}
	})
}

// chunked is a net.Conn that reads data in chunks of the given sizes.
type chunked struct {
	net.Conn
	data  []byte
	sizes []byte
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), 1+int(c.sizes[c.i%len(c.sizes)])*5)
	c.i++
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// TestSockLinger: a lingering read ends with a deadline error when nothing
// comes, after which reads wait as usual; one that gets a byte lifts the
// deadline, so the rest of a frame may come later.
func TestSockLinger(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := &sock{Conn: a}

	s.linger(20 * time.Millisecond)
	p := make([]byte, 4)
	if n, err := s.Read(p); n != 0 || !lingered(err) {
		t.Fatalf("idle lingering read: %d, %v; want nothing and a deadline error", n, err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		b.Write([]byte("ab"))
	}()
	if n, err := s.Read(p); n != 2 || err != nil {
		t.Fatalf("read after the linger: %d, %v", n, err)
	}

	s.linger(20 * time.Millisecond)
	go func() {
		b.Write([]byte("c"))
		time.Sleep(50 * time.Millisecond)
		b.Write([]byte("d"))
	}()
	if n, err := s.Read(p); n != 1 || err != nil {
		t.Fatalf("first byte: %d, %v", n, err)
	}
	if n, err := s.Read(p); n != 1 || err != nil || p[0] != 'd' {
		t.Fatalf("a byte past the linger: %d, %v; the deadline should be lifted", n, err)
	}
}
