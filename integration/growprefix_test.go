package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
)

// TestGrowingResumeOpenPrefix: a session that resumes mid-stream with
// RoomPosition.open_prefix, holding nothing of the message (a reloaded
// page), ends with exactly the text the backend streamed from what the
// resume alone brings: the message once, assembled (a replace chunk),
// then every later version once, in order, whether its position is
// inside the message's chunks or at the room's last seq. Without the
// flag a resume is as before: only the chunks after its position. In
// memory and on Redis.
func TestGrowingResumeOpenPrefix(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			_, tune := classFile(t, growClasses)
			d := start(t, mode, nil, tune)
			ctx := testCtx(t)
			const room, id, total = "ai:prefix", "answer", 20
			stream, err := d.api.Append(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			appendTo := func(to int) {
				t.Helper()
				for v := int(want.Len()/6) + 1; v <= to; v++ {
					data := fmt.Appendf(nil, "tok%02d ", v)
					want.Write(data)
					if err := stream.Send(&corralv1.AppendRequest{Room: room, Id: id, Data: data, Final: v == total,
						Sender: "bot", Version: uint64(v)}); err != nil {
						t.Fatalf("append %d: %v", v, err)
					}
				}
			}
			// Three members in the room from the start; each sees part
			// of the message, then its socket is cut.
			type member struct {
				name   string
				conn   *client.Conn
				log    *chunkLog
				epoch  string
				prefix bool
				cutAt  int
			}
			var ms []*member
			for _, m := range []member{{name: "inside", prefix: true, cutAt: 5}, {name: "atlast", prefix: true, cutAt: 10}, {name: "noflag", cutAt: 5}} {
				c := dial(t, d, m.name, protocol.Proto)
				j, err := c.Join(ctx, room, 0, "")
				if err != nil {
					t.Fatal(err)
				}
				m.conn, m.log, m.epoch = c, newChunkLog(c), j.GetEpoch()
				ms = append(ms, &m)
			}
			appendTo(1)
			positions := map[string]uint64{}
			for _, cutAt := range []int{5, 10} {
				appendTo(cutAt)
				for _, m := range ms {
					if m.cutAt != cutAt {
						continue
					}
					eventually.True(t, 10*time.Second, func() bool { return m.log.version(id) >= uint64(cutAt) }, m.name, "sees version", cutAt)
					_, positions[m.name] = m.log.get(id)
					m.conn.CloseNow()
				}
			}
			// The room's last seq is "atlast"'s position: it resumes
			// before anything more is appended.
			resume := func(m *member) *chunkLog {
				t.Helper()
				w := m.conn.Welcome()
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				back, err := client.Dial(rctx, d.wsURL, client.Options{Token: m.name, Encoding: protocol.Proto, Resume: &corralv1.Resume{
					SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
					Rooms: []*corralv1.RoomPosition{{Room: room, Seq: positions[m.name], Epoch: m.epoch, OpenPrefix: m.prefix}},
				}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(back.CloseNow)
				return newChunkLog(back)
			}
			logs := map[string]*chunkLog{"atlast": resume(ms[1])}
			eventually.True(t, 10*time.Second, func() bool { return logs["atlast"].version(id) >= 10 }, "atlast gets its prefix")
			logs["inside"], logs["noflag"] = resume(ms[0]), resume(ms[2])
			appendTo(total)
			if _, err := stream.CloseAndReceive(); err != nil {
				t.Fatal(err)
			}
			for name, l := range logs {
				eventually.True(t, 10*time.Second, func() bool { return l.version(id) >= total }, name, "sees the final version")
				got, _ := l.get(id)
				if name == "noflag" {
					// As before: the chunks after its position only.
					if got[0].Replace || got[0].Version != 6 {
						t.Errorf("noflag: first chunk %+v, want version 6's chunk", got[0])
					}
					continue
				}
				if !got[0].Replace {
					t.Errorf("%s: first chunk %+v, want the assembled prefix", name, got[0])
				}
				if err := checker.Assembly(got, []byte(want.String()), true); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}
