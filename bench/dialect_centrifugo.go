package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// centrifugoDialect speaks Centrifugo's client protocol, JSON flavour
// (the default "centrifugo-json" over WebSocket at /connection/websocket),
// and publishes through its HTTP server API (POST /api/publish with
// X-API-Key). It is here to measure Centrifugo beside corral, not to be a
// Centrifugo SDK: connect, subscribe (with recovery from a position),
// publications, client publish and the ping/pong are all it knows.
type centrifugoDialect struct {
	t  Target
	hc *http.Client
	// ws dials the WebSockets (nil: http.DefaultClient); the herd sets
	// its resetting dialer's client.
	ws *http.Client
}

func (d *centrifugoDialect) dialThrough(hc *http.Client) { d.ws = hc }

func newCentrifugoDialect(t Target) *centrifugoDialect {
	return &centrifugoDialect{t: t, hc: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256},
	}}
}

func (d *centrifugoDialect) Name() string { return "centrifugo" }

// cfReply is one line of a Centrifugo JSON frame: a reply to a command
// (id set), a push (id 0, push set), or a ping (the empty object).
type cfReply struct {
	ID        uint32       `json:"id,omitempty"`
	Error     *cfError     `json:"error,omitempty"`
	Push      *cfPush      `json:"push,omitempty"`
	Connect   *cfConnect   `json:"connect,omitempty"`
	Subscribe *cfSubscribe `json:"subscribe,omitempty"`
	Publish   *struct{}    `json:"publish,omitempty"`
}

type cfError struct {
	Code    uint32 `json:"code"`
	Message string `json:"message"`
}

func (e *cfError) Error() string {
	return fmt.Sprintf("centrifugo: error %d: %s", e.Code, e.Message)
}

type cfPush struct {
	Channel    string    `json:"channel,omitempty"`
	Pub        *cfPub    `json:"pub,omitempty"`
	Disconnect *cfError  `json:"disconnect,omitempty"`
	Unsub      *struct{} `json:"unsubscribe,omitempty"`
}

type cfPub struct {
	Data   json.RawMessage `json:"data,omitempty"`
	Offset uint64          `json:"offset,omitempty"`
}

type cfConnect struct {
	Client string `json:"client"`
	Ping   uint32 `json:"ping,omitempty"`
	Pong   bool   `json:"pong,omitempty"`
}

type cfSubscribe struct {
	Recoverable  bool    `json:"recoverable,omitempty"`
	Epoch        string  `json:"epoch,omitempty"`
	Offset       uint64  `json:"offset,omitempty"`
	Recovered    bool    `json:"recovered,omitempty"`
	Publications []cfPub `json:"publications,omitempty"`
}

// isPing reports whether r is the server's ping: an empty object, to be
// answered with one when the connect reply said pong.
func (r *cfReply) isPing() bool {
	return r.ID == 0 && r.Error == nil && r.Push == nil && r.Connect == nil && r.Subscribe == nil && r.Publish == nil
}

// decodeCentrifugo splits one WebSocket message of Centrifugo's JSON
// protocol into its replies: the server may put several in one message,
// one JSON object per line.
func decodeCentrifugo(frame []byte) ([]cfReply, error) {
	var out []cfReply
	for len(frame) > 0 {
		line := frame
		if i := bytes.IndexByte(frame, '\n'); i >= 0 {
			line, frame = frame[:i], frame[i+1:]
		} else {
			frame = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var r cfReply
		if err := json.Unmarshal(line, &r); err != nil {
			return out, fmt.Errorf("centrifugo: decode reply: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// cfWait is a command waiting for its reply.
type cfWait struct {
	ch      chan cfReply
	channel string // for a subscribe: where its recovered publications go
}

type centrifugoSession struct {
	ws   *websocket.Conn
	on   func(Pub)
	done chan struct{}
	pong bool

	mu      sync.Mutex // guards the following fields
	nextID  uint32
	waiting map[uint32]cfWait
}

func (d *centrifugoDialect) Dial(ctx context.Context, user string, on func(Pub)) (Session, error) {
	ws, _, err := websocket.Dial(ctx, d.t.WS, &websocket.DialOptions{HTTPClient: cmp.Or(d.ws, http.DefaultClient)})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(16 << 20)
	s := &centrifugoSession{ws: ws, on: on, done: make(chan struct{}), waiting: make(map[uint32]cfWait)}
	go s.readLoop()
	r, err := s.request(ctx, "", func(id uint32) any {
		return map[string]any{"id": id, "connect": map[string]any{"name": "corral-bench", "data": map[string]string{"user": user}}}
	})
	if err != nil {
		ws.CloseNow()
		return nil, err
	}
	if r.Connect == nil {
		ws.CloseNow()
		return nil, errors.New("centrifugo: connect reply without a connect result")
	}
	return s, nil
}

// request sends the command cmd(id) and waits for its reply; a reply
// with an error is returned as a *cfError.
func (s *centrifugoSession) request(ctx context.Context, channel string, cmd func(id uint32) any) (cfReply, error) {
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	w := cfWait{ch: make(chan cfReply, 1), channel: channel}
	s.waiting[id] = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}()
	b, err := json.Marshal(cmd(id))
	if err != nil {
		return cfReply{}, err
	}
	if err := s.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return cfReply{}, err
	}
	select {
	case r := <-w.ch:
		if r.Error != nil {
			return r, r.Error
		}
		return r, nil
	case <-s.done:
		return cfReply{}, errClosed
	case <-ctx.Done():
		return cfReply{}, ctx.Err()
	}
}

// readLoop is the socket's one reader: coder/websocket's Conn.Read, the
// standard client.
func (s *centrifugoSession) readLoop() {
	defer close(s.done)
	ctx := context.Background()
	for {
		_, data, err := s.ws.Read(ctx)
		if err != nil {
			return
		}
		rs, err := decodeCentrifugo(data)
		if err != nil {
			s.ws.Close(websocket.StatusUnsupportedData, "bad frame")
			return
		}
		for i := range rs {
			s.handle(&rs[i])
		}
	}
}

func (s *centrifugoSession) handle(r *cfReply) {
	switch {
	case r.ID != 0:
		s.mu.Lock()
		w, ok := s.waiting[r.ID]
		s.mu.Unlock()
		if !ok {
			return
		}
		// The server may ping right after the connect reply: pong is
		// known before the next frame is read.
		if r.Connect != nil {
			s.mu.Lock()
			s.pong = r.Connect.Pong
			s.mu.Unlock()
		}
		// Recovered publications come before any live one read after
		// this reply.
		if r.Subscribe != nil {
			for _, p := range r.Subscribe.Publications {
				s.on(Pub{Room: w.channel, Offset: p.Offset, Payload: p.Data})
			}
		}
		w.ch <- *r
	case r.Push != nil:
		if p := r.Push.Pub; p != nil {
			s.on(Pub{Room: r.Push.Channel, Offset: p.Offset, Payload: p.Data})
		}
	case r.isPing():
		s.mu.Lock()
		pong := s.pong
		s.mu.Unlock()
		if pong {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.ws.Write(ctx, websocket.MessageText, []byte("{}"))
			cancel()
		}
	}
}

func (s *centrifugoSession) Join(ctx context.Context, room string, from Position, recover bool) (Position, error) {
	r, err := s.request(ctx, room, func(id uint32) any {
		sub := map[string]any{"channel": room}
		if recover {
			sub["recover"] = true
			sub["offset"] = from.Offset
			sub["epoch"] = from.Epoch
		}
		return map[string]any{"id": id, "subscribe": sub}
	})
	if err != nil {
		return Position{}, err
	}
	if r.Subscribe == nil {
		return Position{}, errors.New("centrifugo: subscribe reply without a subscribe result")
	}
	if recover && !r.Subscribe.Recovered {
		return Position{Offset: r.Subscribe.Offset, Epoch: r.Subscribe.Epoch}, errNotRecovered
	}
	return Position{Offset: r.Subscribe.Offset, Epoch: r.Subscribe.Epoch}, nil
}

// errNotRecovered is a subscribe with recovery that the server could not
// recover (the history no longer holds the position): the member joined
// but has missed publications.
var errNotRecovered = errors.New("bench: joined without recovering the missed publications")

func (s *centrifugoSession) Publish(ctx context.Context, room string, payload []byte) error {
	_, err := s.request(ctx, "", func(id uint32) any {
		return map[string]any{"id": id, "publish": map[string]any{"channel": room, "data": json.RawMessage(payload)}}
	})
	return err
}

func (s *centrifugoSession) Done() <-chan struct{} { return s.done }

func (s *centrifugoSession) Close() error {
	return s.ws.Close(websocket.StatusNormalClosure, "")
}

func (s *centrifugoSession) Drop() { _ = s.ws.CloseNow() }

// ServerPublish posts to Centrifugo's HTTP API: /api/publish on
// Target.API, with Target.APIKey as X-API-Key.
func (d *centrifugoDialect) ServerPublish(ctx context.Context, room string, payload []byte) (Position, error) {
	body, err := json.Marshal(map[string]any{"channel": room, "data": json.RawMessage(payload)})
	if err != nil {
		return Position{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(d.t.API, "/")+"/api/publish", bytes.NewReader(body))
	if err != nil {
		return Position{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if d.t.APIKey != "" {
		req.Header.Set("X-API-Key", d.t.APIKey)
	}
	res, err := d.hc.Do(req)
	if err != nil {
		return Position{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return Position{}, err
	}
	if res.StatusCode != http.StatusOK {
		return Position{}, fmt.Errorf("centrifugo: api publish: %s", res.Status)
	}
	return decodeAPIPublish(b)
}

// decodeAPIPublish reads the server API's answer to a publish.
func decodeAPIPublish(b []byte) (Position, error) {
	var out struct {
		Error  *cfError `json:"error"`
		Result *struct {
			Offset uint64 `json:"offset"`
			Epoch  string `json:"epoch"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return Position{}, fmt.Errorf("centrifugo: decode api reply: %w", err)
	}
	if out.Error != nil {
		return Position{}, out.Error
	}
	if out.Result == nil {
		return Position{}, nil
	}
	return Position{Offset: out.Result.Offset, Epoch: out.Result.Epoch}, nil
}
