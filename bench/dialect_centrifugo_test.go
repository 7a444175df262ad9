package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Frames in the shape Centrifugo 6.9.1 writes them with its JSON protocol
// (the fields the dialect reads are the ones a run against the real server
// with bench/scripts/versus.sh's configuration exercised).
var (
	cfConnectReply = []byte(`{"id":1,"connect":{"client":"4d1f6b2e-9a3c-4c55-8f0e-2b7d1c9a0e11","version":"6.9.1","ping":25,"pong":true}}`)
	cfSubscribeRec = []byte(`{"id":2,"subscribe":{"recoverable":true,"epoch":"xTQh","offset":7,"positioned":true,"recovered":true,"was_recovering":true,"publications":[{"data":{"t":1,"n":5},"offset":6},{"data":{"t":2,"n":6},"offset":7}]}}`)
	// Two pushes and a publish reply batched in one WebSocket message.
	cfBatch = []byte(`{"push":{"channel":"bench-a-0","pub":{"data":{"t":3,"n":7},"offset":8}}}` + "\n" +
		`{"push":{"channel":"bench-a-0","pub":{"data":{"t":4,"n":8},"offset":9}}}` + "\n" +
		`{"id":3,"publish":{}}`)
	cfPing     = []byte(`{}`)
	cfErrReply = []byte(`{"id":4,"error":{"code":103,"message":"permission denied"}}`)
)

func TestDecodeCentrifugo(t *testing.T) {
	tests := map[string]struct {
		frame []byte
		check func(t *testing.T, rs []cfReply)
	}{
		"connect": {cfConnectReply, func(t *testing.T, rs []cfReply) {
			if len(rs) != 1 || rs[0].ID != 1 || rs[0].Connect == nil || !rs[0].Connect.Pong || rs[0].Connect.Ping != 25 {
				t.Fatalf("got %+v", rs)
			}
		}},
		"subscribe with recovery": {cfSubscribeRec, func(t *testing.T, rs []cfReply) {
			s := rs[0].Subscribe
			if s == nil || !s.Recovered || s.Epoch != "xTQh" || s.Offset != 7 || len(s.Publications) != 2 || s.Publications[1].Offset != 7 {
				t.Fatalf("got %+v", s)
			}
			if string(s.Publications[0].Data) != `{"t":1,"n":5}` {
				t.Fatalf("data %s", s.Publications[0].Data)
			}
		}},
		"batch": {cfBatch, func(t *testing.T, rs []cfReply) {
			if len(rs) != 3 || rs[0].Push.Pub.Offset != 8 || rs[1].Push.Pub.Offset != 9 || rs[2].ID != 3 || rs[2].Publish == nil {
				t.Fatalf("got %+v", rs)
			}
			if rs[0].Push.Channel != "bench-a-0" {
				t.Fatalf("channel %q", rs[0].Push.Channel)
			}
		}},
		"ping": {cfPing, func(t *testing.T, rs []cfReply) {
			if len(rs) != 1 || !rs[0].isPing() {
				t.Fatalf("got %+v", rs)
			}
		}},
		"error": {cfErrReply, func(t *testing.T, rs []cfReply) {
			if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != 103 || rs[0].isPing() {
				t.Fatalf("got %+v", rs)
			}
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rs, err := decodeCentrifugo(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, rs)
		})
	}
	if _, err := decodeCentrifugo([]byte(`{"id":1,`)); err == nil {
		t.Fatal("a truncated frame decoded")
	}
}

func TestDecodeAPIPublish(t *testing.T) {
	p, err := decodeAPIPublish([]byte(`{"result":{"offset":42,"epoch":"ab"}}`))
	if err != nil || p != (Position{Offset: 42, Epoch: "ab"}) {
		t.Fatalf("got %+v, %v", p, err)
	}
	if _, err := decodeAPIPublish([]byte(`{"error":{"code":102,"message":"unknown channel"}}`)); err == nil || !strings.Contains(err.Error(), "102") {
		t.Fatalf("error reply: %v", err)
	}
}

func FuzzDecodeCentrifugo(f *testing.F) {
	for _, s := range [][]byte{cfConnectReply, cfSubscribeRec, cfBatch, cfPing, cfErrReply, []byte("\n\n"), []byte(`{"push":{}}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := decodeCentrifugo(b)
		if err != nil {
			return
		}
		// What decodes must encode again and decode to the same.
		for _, r := range rs {
			again, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			rs2, err := decodeCentrifugo(again)
			if err != nil || len(rs2) != 1 {
				t.Fatalf("%s: %v", again, err)
			}
		}
	})
}

// fakeCentrifugo answers the commands the dialect sends with recorded
// frames: connect, subscribe (with recovered publications), publish; it
// pings once and pushes a batch.
func fakeCentrifugo(t *testing.T, pongs chan<- struct{}) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/publish" {
			if r.Header.Get("X-API-Key") != "k" {
				http.Error(w, "no key", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"result":{"offset":10,"epoch":"xTQh"}}`))
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var cmd map[string]json.RawMessage
			if err := json.Unmarshal(b, &cmd); err != nil {
				t.Errorf("command %s: %v", b, err)
				return
			}
			switch {
			case cmd["connect"] != nil:
				_ = c.Write(ctx, websocket.MessageText, cfConnectReply)
				_ = c.Write(ctx, websocket.MessageText, cfPing)
			case cmd["subscribe"] != nil:
				var sub struct {
					Channel string `json:"channel"`
					Recover bool   `json:"recover"`
					Offset  uint64 `json:"offset"`
					Epoch   string `json:"epoch"`
				}
				_ = json.Unmarshal(cmd["subscribe"], &sub)
				if !sub.Recover || sub.Offset != 5 || sub.Epoch != "xTQh" {
					t.Errorf("subscribe %s", cmd["subscribe"])
				}
				_ = c.Write(ctx, websocket.MessageText, cfSubscribeRec)
				_ = c.Write(ctx, websocket.MessageText, cfBatch[:strings.LastIndexByte(string(cfBatch), '\n')])
			case cmd["publish"] != nil:
				_ = c.Write(ctx, websocket.MessageText, []byte(`{"id":`+string(cmd["id"])+`,"publish":{}}`))
			case len(cmd) == 0:
				pongs <- struct{}{}
			}
		}
	}))
}

func TestCentrifugoSession(t *testing.T) {
	pongs := make(chan struct{}, 1)
	srv := fakeCentrifugo(t, pongs)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := ParseDialect("centrifugo", Target{WS: "ws" + strings.TrimPrefix(srv.URL, "http"), API: srv.URL, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []uint64
	five := make(chan struct{})
	s, err := d.Dial(ctx, "u", func(p Pub) {
		mu.Lock()
		defer mu.Unlock()
		if p.Room != "bench-a-0" {
			t.Errorf("room %q", p.Room)
		}
		got = append(got, p.Offset)
		if len(got) == 4 {
			close(five)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	select {
	case <-pongs:
	case <-ctx.Done():
		t.Fatal("no pong to the server's ping")
	}
	pos, err := s.Join(ctx, "bench-a-0", Position{Offset: 5, Epoch: "xTQh"}, true)
	if err != nil || pos != (Position{Offset: 7, Epoch: "xTQh"}) {
		t.Fatalf("join: %+v, %v", pos, err)
	}
	if err := s.Publish(ctx, "bench-a-0", []byte(`{"t":5}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-five:
	case <-ctx.Done():
		t.Fatal("publications not all read")
	}
	mu.Lock()
	if want := []uint64{6, 7, 8, 9}; len(got) != 4 || got[0] != 6 || got[3] != 9 {
		t.Errorf("offsets %v, want %v (recovered first, in order)", got, want)
	}
	mu.Unlock()
	p, err := d.ServerPublish(ctx, "bench-a-0", []byte(`{"t":6}`))
	if err != nil || p.Offset != 10 {
		t.Fatalf("server publish: %+v, %v", p, err)
	}
}
