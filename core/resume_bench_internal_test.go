package core

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/sessions"
)

// BenchmarkResume is one client's resume of a session in n rooms, nothing
// missed, against the Redis session store (a private redis-server): the
// attach with hello.resume up to the rooms gone live, then the detach. It
// reports the session store calls that write positions per resume
// (positions/op) beside the allocations; the Redis round trips of those
// writes are one per call.
func BenchmarkResume(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("rooms=%d", n), func(b *testing.B) {
			client := redistest.Client(b, redistest.Start(b))
			red := sessions.NewRedis(client, sessions.Options{Prefix: redistest.Prefix(b), TTL: time.Minute})
			store := &positionWrites{Store: red, rooms: map[string]sessions.Position{}}
			b.Cleanup(func() { store.Close() })
			c := New(Config{Sessions: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			b.Cleanup(func() { c.Close() })
			ctx := context.Background()
			l := fakeLink(c)
			take := func(want func(*corralv1.ServerFrame) bool) *corralv1.ServerFrame {
				for {
					for _, f := range l.Take(1<<20, 1<<30) {
						if sf := serverFrameOf(f); sf != nil && want(sf) {
							return sf
						}
					}
					<-l.Ready()
				}
			}
			isWelcome := func(f *corralv1.ServerFrame) bool { return f.GetWelcome() != nil }
			id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
			conn := uint64(1)
			s := c.life.Attach(ctx, l, conn, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
			w := take(isWelcome).GetWelcome()
			var rooms []*corralv1.RoomPosition
			for i := range n {
				room := fmt.Sprintf("r%d", i)
				c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}})
				j := take(func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil }).GetJoined()
				rooms = append(rooms, &corralv1.RoomPosition{Room: room, Epoch: j.GetEpoch()})
			}
			c.life.Detach(s, l, conn, false)
			store.reset()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				conn++
				s = c.life.Attach(ctx, l, conn, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
					SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(), Rooms: rooms,
				}}})
				if s == nil {
					b.Fatal("resume refused")
				}
				w = take(isWelcome).GetWelcome() // the rotated token
				c.life.Detach(s, l, conn, false)
			}
			b.StopTimer()
			calls, _ := store.reset()
			b.ReportMetric(float64(calls)/float64(b.N), "positions/op")
		})
	}
}
