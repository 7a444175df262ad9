package hooks

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect/v2/connecthttp"
)

// The response budget: the bytes of backend responses being read, every
// hook's calls together, are bounded (Config.ResponseBudget). A call's
// response body counts its bytes as they are read and gives them back
// when the body is closed (Connect closes it once the message is
// decoded); a read that would pass the budget fails the call with
// KindOverloaded. Why: each response is bounded (4 MiB, Connect's
// default), but not their sum: 128 hellos against a backend answering
// 256 MB took the server from ~0 to 349 MB, and the calls in flight (256
// per hook by default) allow more than a gigabyte. The client asks for no
// compression, so that the bytes counted are the messages' own (and a
// small gzip body cannot inflate to 4 MiB per call).

// errResponseBudget fails a call whose response would pass the budget.
var errResponseBudget = errors.New("hooks: responses in flight over their byte budget")

// budgetClient counts its responses' bodies against one budget. Safe for
// concurrent use.
type budgetClient struct {
	inner connecthttp.HTTPClient
	max   int64
	used  atomic.Int64 // bytes read of bodies not yet closed
}

func (c *budgetClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.inner.Do(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &budgetBody{rc: resp.Body, c: c}
	return resp, nil
}

// budgetBody is a response body that counts what it read against its
// client's budget until it is closed.
type budgetBody struct {
	rc io.ReadCloser
	c  *budgetClient

	mu     sync.Mutex // guards the following fields
	held   int64      // counted against the budget
	closed bool
}

func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n == 0 {
		return n, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	if b.c.used.Add(int64(n)) > b.c.max {
		b.c.used.Add(-int64(n) - b.held)
		b.held, b.closed = 0, true
		b.rc.Close()
		return 0, errResponseBudget
	}
	b.held += int64(n)
	return n, err
}

func (b *budgetBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.c.used.Add(-b.held)
	b.held, b.closed = 0, true
	return b.rc.Close()
}
