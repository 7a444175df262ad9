package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
)

// A Dialect is how the generator speaks to one kind of server: corral's
// protocol or Centrifugo's. The versus scenario drives either through it,
// with the same standard client (coder/websocket's Conn.Read, one
// goroutine per socket), so that the two servers' figures differ by the
// server only (and by the generator's decoding, which is its own CPU).
type Dialect interface {
	// Name is the --server value, e.g. "corral".
	Name() string
	// Dial connects as user and returns once the server has accepted the
	// connection. on receives every publication the socket reads, in
	// order, on the socket's read goroutine.
	Dial(ctx context.Context, user string, on func(Pub)) (Session, error)
	// ServerPublish publishes payload (a JSON object) to room through the
	// server's API, as an application backend would.
	ServerPublish(ctx context.Context, room string, payload []byte) (Position, error)
}

// A Session is one client connection of a Dialect. Join and Publish may be
// called concurrently with the socket's reading.
type Session interface {
	// Join subscribes to room. With recover, the publications after from
	// are delivered first (to the Dial callback), then live ones.
	Join(ctx context.Context, room string, from Position, recover bool) (Position, error)
	// Publish sends payload to room as this client and waits for the
	// server's acknowledgement.
	Publish(ctx context.Context, room string, payload []byte) error
	// Done is closed when the connection has ended.
	Done() <-chan struct{}
	// Close ends the connection with a close handshake; Drop ends it
	// without one, as a lost network would.
	Close() error
	Drop()
}

// Position is a place in a room's stream: corral's (seq, epoch) or
// Centrifugo's (offset, epoch).
type Position struct {
	Offset uint64
	Epoch  string
}

// Pub is one publication read by a member.
type Pub struct {
	Room    string
	Offset  uint64
	Payload []byte
}

// ParseDialect returns the dialect named by --server for target t.
func ParseDialect(name string, t Target) (Dialect, error) {
	switch name {
	case "corral", "":
		return &corralDialect{t: t}, nil
	case "centrifugo":
		return newCentrifugoDialect(t), nil
	}
	return nil, fmt.Errorf("bench: --server is corral or centrifugo, not %q", name)
}

// corralDialect is corral's own protocol through package client, reading
// the standard way (ClientStandard), and its internal RoomService API.
type corralDialect struct {
	t   Target
	api atomic.Pointer[corralv1connect.RoomServiceClient]
	// ws dials the WebSockets (nil: http.DefaultClient); the herd sets
	// its resetting dialer's client.
	ws *http.Client
}

func (d *corralDialect) dialThrough(hc *http.Client) { d.ws = hc }

// A dialThrougher dials its WebSockets through hc from now on: the herd
// (versus storm) gives its resetting dialer's client, so that it can end
// every socket with a TCP RST.
type dialThrougher interface{ dialThrough(hc *http.Client) }

func (d *corralDialect) Name() string { return "corral" }

func (d *corralDialect) Dial(ctx context.Context, user string, on func(Pub)) (Session, error) {
	token := d.t.Token
	if token == "" {
		token = user
	}
	c, err := client.Dial(ctx, d.t.WS, client.Options{
		Token: token,
		OnFrame: func(fr *corralv1.ServerFrame) {
			if m := fr.GetMessage(); m != nil {
				on(Pub{Room: m.GetRoom(), Offset: m.GetSeq(), Payload: m.GetPayload()})
			}
		},
		HTTPClient: ClientStandard.httpClient(d.ws),
	})
	if err != nil {
		return nil, err
	}
	s := &corralSession{c: c}
	go func() {
		for range c.Frames() {
		}
	}()
	return s, nil
}

func (d *corralDialect) ServerPublish(ctx context.Context, room string, payload []byte) (Position, error) {
	api := d.api.Load()
	if api == nil {
		c := apiClient(d.t)
		d.api.CompareAndSwap(nil, &c)
		api = d.api.Load()
	}
	res, err := (*api).Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: payload})
	if err != nil {
		return Position{}, err
	}
	return Position{Offset: res.GetSeq()}, nil
}

type corralSession struct {
	c   *client.Conn
	ids atomic.Uint64
}

func (s *corralSession) Join(ctx context.Context, room string, from Position, recover bool) (Position, error) {
	var j *corralv1.Joined
	var err error
	if recover {
		j, err = s.c.Join(ctx, room, from.Offset, from.Epoch)
	} else {
		j, err = s.c.Join(ctx, room, 0, "")
	}
	if err != nil {
		return Position{}, err
	}
	return Position{Offset: j.GetSeq(), Epoch: j.GetEpoch()}, nil
}

func (s *corralSession) Publish(ctx context.Context, room string, payload []byte) error {
	_, err := s.c.Publish(ctx, room, strconv.FormatUint(s.ids.Add(1), 10), payload)
	return err
}

func (s *corralSession) Done() <-chan struct{} { return s.c.Done() }
func (s *corralSession) Close() error          { return s.c.Close() }
func (s *corralSession) Drop()                 { s.c.CloseNow() }

// errClosed is returned by a request whose connection ended first.
var errClosed = errors.New("bench: connection closed")
