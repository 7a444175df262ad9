package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect/v2"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// growClasses are the room classes of the growing messages' tests.
const growClasses = `version: grow
rooms:
  - name: ai
    match: "ai:*"
    growing: {delta: true}
  - name: tight
    match: "tight:*"
    growing: {max-bytes: 16, append-rate: 1, append-burst: 2}
  - name: news
    match: "news:*"
    publish: none
    signal: none
`

// chunkLog records the chunks of growing messages one connection
// receives, by message id, and its position in the room.
type chunkLog struct {
	mu     sync.Mutex
	chunks map[string][]checker.Chunk
	seq    uint64
}

func (l *chunkLog) follow(c *client.Conn) {
	go func() {
		for f := range c.Frames() {
			m := f.GetMessage()
			l.mu.Lock()
			if j := f.GetJoined(); j != nil {
				l.seq = max(l.seq, j.GetSeq())
			}
			if m != nil {
				if ch := m.GetChunk(); ch != nil {
					l.chunks[m.GetId()] = append(l.chunks[m.GetId()], checker.Chunk{Seq: m.GetSeq(), Version: ch.GetVersion(),
						Data: ch.GetData(), Delta: ch.GetDelta(), Replace: ch.GetReplace(), Final: ch.GetFinal()})
				}
				l.seq = max(l.seq, m.GetSeq())
			}
			l.mu.Unlock()
		}
	}()
}

func newChunkLog(c *client.Conn) *chunkLog {
	l := &chunkLog{chunks: make(map[string][]checker.Chunk)}
	l.follow(c)
	return l
}

// version is the newest version of id the connection received.
func (l *chunkLog) version(id string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.chunks[id]
	if len(cs) == 0 {
		return 0
	}
	return cs[len(cs)-1].Version
}

func (l *chunkLog) get(id string) ([]checker.Chunk, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]checker.Chunk(nil), l.chunks[id]...), l.seq
}

// TestGrowingMessages: a writer grows a message through the Append frame
// and a backend through the RoomService.Append stream, in memory and on
// Redis. A member in the room from the start, one that joins live in the
// middle (it gets the message so far as one replace chunk, then the
// rest) and one whose socket is cut in the middle and that resumes its
// session at its position (it gets the chunks after it), and one that
// joins from that position on a new connection (not a resume: it gets the
// message whole after its replay, then the rest) each assemble the
// exact body, every version exactly once and in order
// (checker.Assembly); a retried version is stored once; regular
// messages interleave in the room's order; GetMessage reads the whole
// message. The class has growing.delta: a replace chunk reaches the
// members as a delta the checker applies. The Events stream carries the
// assembled message once.
func TestGrowingMessages(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			_, tune := classFile(t, growClasses)
			d := start(t, mode, nil, tune)
			for _, via := range []string{"frame", "api"} {
				t.Run(via, func(t *testing.T) { runGrowing(t, d, "ai:"+via, via) })
			}
		})
	}
}

func runGrowing(t *testing.T, d *deployment, room, via string) {
	ctx := testCtx(t)
	const id, total = "answer", 30
	writer := dial(t, d, "writer", protocol.Proto)
	if _, err := writer.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	early := dial(t, d, "early", protocol.JSON)
	if _, err := early.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	earlyLog := newChunkLog(early)
	cut := dial(t, d, "cut", protocol.Proto)
	cutJoined, err := cut.Join(ctx, room, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	cutLog := newChunkLog(cut)

	var stream corralv1connect.RoomServiceAppendClientStream
	if via == "api" {
		if stream, err = d.api.Append(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var want strings.Builder
	appendChunk := func(v int) {
		t.Helper()
		data := fmt.Appendf(nil, "tok%d ", v)
		replace := v == 12 // the whole body again, with a small change: a delta
		if replace {
			data = []byte(strings.Replace(want.String(), "tok3 ", "TOK3 ", 1) + "tok12 ")
			want.Reset()
		}
		want.Write(data)
		final := v == total
		switch via {
		case "frame":
			p, err := writer.Append(ctx, room, id, data, client.AppendOptions{Version: uint64(v), Final: final, Replace: replace})
			if err != nil || p.GetId() != id || p.GetSeq() == 0 || p.GetDuplicate() {
				t.Fatalf("append %d: %v, %v", v, p, err)
			}
		case "api":
			if err := stream.Send(&corralv1.AppendRequest{Room: room, Id: id, Data: data, Final: final, Replace: replace,
				Sender: "bot", Version: uint64(v)}); err != nil {
				t.Fatalf("append %d: %v", v, err)
			}
		}
		if v%5 == 0 {
			// Another message in between: chunks are in the room's order.
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: payload(v)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := func(l *chunkLog, v int) {
		t.Helper()
		eventually.True(t, 10*time.Second, func() bool { return l.version(id) >= uint64(v) }, "version", v, "delivered")
	}
	for v := 1; v <= 10; v++ {
		appendChunk(v)
	}
	seen(earlyLog, 10)
	if via == "frame" {
		// A retry of a stored version is answered as a duplicate and
		// stored once (the checker would see a second version 5).
		p, err := writer.Append(ctx, room, id, []byte("tok5 "), client.AppendOptions{Version: 5})
		if err != nil || !p.GetDuplicate() {
			t.Fatalf("retry of version 5: %v, %v", p, err)
		}
	}

	// A member joins live in the middle.
	mid := dial(t, d, "mid", protocol.Proto)
	if _, err := mid.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	midLog := newChunkLog(mid)
	for v := 11; v <= 15; v++ {
		appendChunk(v)
	}
	seen(cutLog, 15)
	// Another one's socket is cut; it resumes at its position later.
	before, pos := cutLog.get(id)
	w := cut.Welcome()
	cut.CloseNow()
	for v := 16; v <= 20; v++ {
		appendChunk(v)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	back, err := client.Dial(rctx, d.wsURL, client.Options{Token: "cut", Encoding: protocol.Proto, Resume: &corralv1.Resume{
		SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
		Rooms: []*corralv1.RoomPosition{{Room: room, Seq: pos, Epoch: cutJoined.GetEpoch()}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.CloseNow)
	backLog := newChunkLog(back)
	// A new connection joins from the same position, not as a resume: it
	// holds nothing of the message, and gets it whole after its replay.
	posJoin := dial(t, d, "posjoin", protocol.JSON)
	if _, err := posJoin.Join(ctx, room, pos, cutJoined.GetEpoch()); err != nil {
		t.Fatal(err)
	}
	posLog := newChunkLog(posJoin)
	for v := 21; v <= total; v++ {
		appendChunk(v)
	}
	if via == "api" {
		res, err := stream.CloseAndReceive()
		if err != nil {
			t.Fatal(err)
		}
		if r := res; r.GetChunks() != total || r.GetVersion() != total || !r.GetFinal() || r.GetSeq() == 0 {
			t.Fatalf("Append answered %v", r)
		}
	}
	for name, l := range map[string]*chunkLog{"early": earlyLog, "mid": midLog, "resumed": backLog, "positional": posLog} {
		seen(l, total)
		got, _ := l.get(id)
		if name == "resumed" {
			got = append(before, got...)
		}
		if err := checker.Assembly(got, []byte(want.String()), true); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if (name == "mid" || name == "positional") && (!got[0].Replace || got[0].Version < 10) {
			t.Errorf("%s: first chunk %+v, want the prefix (replace, version 10 or more)", name, got[0])
		}
	}
	got, _ := earlyLog.get(id)
	if got[11].Delta == nil {
		t.Errorf("the replace chunk reached a member with its data, not as a delta: %+v", got[11])
	}
	// The event log holds the message once, assembled, at its final
	// chunk (its other chunks are no events): read it up to a marker
	// published after it.
	marker, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: []byte(`"marker"`)})
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
	defer ecancel()
	evs, err := d.api.Events(ectx, &corralv1.EventsRequest{FromOldest: true, Rooms: []string{room}})
	if err != nil {
		t.Fatal(err)
	}
	var assembled []*corralv1.Message
	for done := false; !done; {
		er, err := evs.Receive()
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		for _, ev := range er.GetEvents() {
			m := ev.GetMessage()
			switch {
			case m.GetSeq() == marker.GetSeq():
				done = true
			case m.GetId() == id && m.GetChunk() != nil:
				assembled = append(assembled, m)
			}
		}
	}
	if len(assembled) != 1 || string(assembled[0].GetChunk().GetData()) != want.String() || !assembled[0].GetChunk().GetFinal() {
		t.Errorf("the event log holds %d chunk events of the message (%v), want the assembled message once", len(assembled), assembled)
	}
	ecancel()
	res, err := d.api.GetMessage(ctx, &corralv1.GetMessageRequest{Room: room, Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.GetMessage(); string(m.GetChunk().GetData()) != want.String() || m.GetChunk().GetVersion() != total ||
		!m.GetChunk().GetFinal() || res.GetEpoch() != cutJoined.GetEpoch() {
		t.Fatalf("GetMessage: %v", res)
	}
}

// TestGrowingRefusals: each refusal of an append has its code and the
// append's id as ref, and stores nothing: after the final chunk (4412),
// past the class's growing.max-bytes (4413), past its append rate
// (4101 with a retry delay), a version more than one ahead (4106), in a
// read-only class (4403), outside the room (4404); the API's answers
// too.
func TestGrowingRefusals(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			_, tune := classFile(t, growClasses)
			d := start(t, mode, nil, tune)
			ctx := testCtx(t)
			c := dial(t, d, "writer", protocol.JSON)
			for _, room := range []string{"ai:r", "tight:r", "news:r"} {
				if _, err := c.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			refused := func(room, id string, data string, o client.AppendOptions, want corralv1.Code) *corralv1.Error {
				t.Helper()
				_, err := c.Append(ctx, room, id, []byte(data), o)
				var se *client.ServerError
				if !errors.As(err, &se) || se.Err.GetCode() != want || se.Err.GetRef() != id {
					t.Fatalf("append %s in %s: %v, want code %d with ref %s", id, room, err, want, id)
				}
				return se.Err
			}
			if _, err := c.Append(ctx, "ai:r", "done", []byte("all"), client.AppendOptions{Final: true}); err != nil {
				t.Fatal(err)
			}
			refused("ai:r", "done", "more", client.AppendOptions{}, corralv1.Code_CODE_MESSAGE_FINAL)
			refused("ai:r", "ahead", "x", client.AppendOptions{Version: 2}, corralv1.Code_CODE_OUT_OF_ORDER)
			refused("news:r", "n", "x", client.AppendOptions{}, corralv1.Code_CODE_FORBIDDEN)
			refused("elsewhere", "e", "x", client.AppendOptions{}, corralv1.Code_CODE_NOT_JOINED)
			// tight: 16 bytes, 2 appends at once then 1 a second.
			if _, err := c.Append(ctx, "tight:r", "t", []byte("0123456789"), client.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			refused("tight:r", "t", "0123456789", client.AppendOptions{}, corralv1.Code_CODE_TOO_LARGE)
			if e := refused("tight:r", "t", "ab", client.AppendOptions{}, corralv1.Code_CODE_RATE_LIMITED); e.GetRetryAfterMs() == 0 {
				t.Fatalf("rate limited without a delay: %v", e)
			}
			res, err := d.api.GetMessage(ctx, &corralv1.GetMessageRequest{Room: "tight:r", Id: "t"})
			if err != nil || string(res.GetMessage().GetChunk().GetData()) != "0123456789" || res.GetMessage().GetChunk().GetVersion() != 1 {
				t.Fatalf("after the refusals: %v, %v", res, err)
			}

			// The API: the same refusals end the stream.
			apiAppend := func(reqs ...*corralv1.AppendRequest) error {
				s, err := d.api.Append(ctx)
				if err != nil {
					return err
				}
				for _, r := range reqs {
					if err := s.Send(r); err != nil && !errors.Is(err, io.EOF) {
						return err
					}
				}
				_, err = s.CloseAndReceive()
				return err
			}
			if err := apiAppend(&corralv1.AppendRequest{Room: "ai:r", Id: "done", Data: []byte("x")}); connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("API append after the final chunk: %v", err)
			}
			if err := apiAppend(&corralv1.AppendRequest{Room: "tight:r", Id: "t", Data: []byte("0123456789")}); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("API append past max-bytes: %v", err)
			}
			if err := apiAppend(&corralv1.AppendRequest{Room: "ai:r", Data: []byte("x")}); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("API append without an id: %v", err)
			}
			if _, err := d.api.GetMessage(ctx, &corralv1.GetMessageRequest{Room: "ai:r", Id: "nothing"}); connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("GetMessage of an unknown id: %v", err)
			}
		})
	}
}

// TestGrowingJoinStorm: members join live one after another while a
// backend streams chunks through RoomService.Append as fast as it can
// (no pause for the joins): each joiner's prefix meets the live chunks
// with no version missing or doubled (the race between the store's read
// of the open message and the chunks arriving), checked by
// checker.Assembly; in memory, on Redis, on Redis Cluster and with the
// edge and the core in separate processes.
func TestGrowingJoinStorm(t *testing.T) {
	for _, mode := range []string{"serve", "redis", "split", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			_, tune := classFile(t, growClasses)
			if mode == "cluster" {
				if testing.Short() {
					t.Skip("starts a Redis Cluster")
				}
				url, prefix, classes := redistest.StartCluster(t).URL(), redistest.Prefix(t), tune
				mode, tune = "serve", func(o *server.Options) {
					classes(o)
					o.RedisURL, o.RedisPrefix = url, prefix
				}
			}
			d := start(t, mode, nil, tune)
			ctx := testCtx(t)
			const room, id, total, joiners = "ai:storm", "s", 400, 12
			stream, err := d.api.Append(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			for v := 1; v <= total; v++ {
				want.WriteString(fmt.Sprintf("t%d ", v))
			}
			first := dial(t, d, "first", protocol.Proto)
			if _, err := first.Join(ctx, room, 0, ""); err != nil {
				t.Fatal(err)
			}
			logs := []*chunkLog{newChunkLog(first)}
			sent := make(chan struct{})
			joined := make(chan struct{})
			go func() {
				defer close(sent)
				// A chunk every half millisecond: the joins below happen
				// while chunks arrive; the final one waits for them.
				tick := time.NewTicker(500 * time.Microsecond)
				defer tick.Stop()
				for v := 1; v <= total; v++ {
					if v == total {
						<-joined
					}
					<-tick.C
					if err := stream.Send(&corralv1.AppendRequest{Room: room, Id: id, Data: fmt.Appendf(nil, "t%d ", v),
						Final: v == total, Version: uint64(v)}); err != nil {
						t.Errorf("append %d: %v", v, err)
						return
					}
				}
			}()
			for i := range joiners {
				// Each joins once the first member saw some more chunks.
				at := uint64((i + 1) * total / (joiners + 2))
				eventually.True(t, 20*time.Second, func() bool { return logs[0].version(id) >= at }, "the first member's version ", at)
				c := dial(t, d, fmt.Sprintf("joiner%d", i), protocol.Proto)
				if _, err := c.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
				logs = append(logs, newChunkLog(c))
			}
			close(joined)
			<-sent
			if res, err := stream.CloseAndReceive(); err != nil || res.GetChunks() != total {
				t.Fatalf("Append: %v, %v", res, err)
			}
			for i, l := range logs {
				eventually.Within(20*time.Second, func() bool { return l.version(id) >= total })
				got, _ := l.get(id)
				if err := checker.Assembly(got, []byte(want.String()), true); err != nil {
					t.Errorf("member %d: %v", i, err)
				}
			}
		})
	}
}
