package history_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redistest"
)

func benchPayload() []byte { return []byte(`{"text":"hello, room","n":12345}`) }

func reportOps(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkMemoryAppend(b *testing.B) {
	ctx := context.Background()
	b.Run("room=1", func(b *testing.B) {
		s := history.NewMemory(history.MemoryOptions{})
		msg := &corralv1.Message{Room: "r", Sender: "u", Payload: benchPayload()}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Append(ctx, "r", msg, ""); err != nil {
				b.Fatal(err)
			}
		}
		reportOps(b)
	})
	b.Run("room=1/dedupe", func(b *testing.B) {
		s := history.NewMemory(history.MemoryOptions{})
		msg := &corralv1.Message{Room: "r", Sender: "u", Payload: benchPayload()}
		keys := make([]string, 1<<16)
		for i := range keys {
			keys[i] = "session:" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := s.Append(ctx, "r", msg, keys[i&(len(keys)-1)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportOps(b)
	})
	b.Run("parallel/room-per-goroutine", func(b *testing.B) {
		s := history.NewMemory(history.MemoryOptions{})
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			room := "r" + strconv.FormatInt(n.Add(1), 10)
			msg := &corralv1.Message{Room: room, Sender: "u", Payload: benchPayload()}
			for pb.Next() {
				if _, err := s.Append(ctx, room, msg, ""); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportOps(b)
	})
}

// BenchmarkRedisAppend appends from many goroutines at once, so that the
// client pipelines the scripts automatically.
func BenchmarkRedisAppend(b *testing.B) {
	addr := redistest.Start(b)
	client := redistest.Client(b, addr)
	ctx := context.Background()
	for _, rooms := range []string{"one", "per-goroutine"} {
		b.Run("parallel/rooms="+rooms, func(b *testing.B) {
			s := history.NewRedis(client, history.RedisOptions{Prefix: redistest.Prefix(b), MaxLen: 1000})
			defer s.Close()
			var n atomic.Int64
			b.SetParallelism(64)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				room := "r"
				if rooms != "one" {
					room += strconv.FormatInt(n.Add(1), 10)
				}
				msg := &corralv1.Message{Room: room, Sender: "u", Payload: benchPayload()}
				for pb.Next() {
					if _, err := s.Append(ctx, room, msg, ""); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportOps(b)
		})
	}
	// A publish of a session with an id (dedupe key), without and with its
	// place in the session's sequence (the sender order's GET and SET in
	// append.lua): each goroutine is one session.
	for _, ordered := range []bool{false, true} {
		b.Run(fmt.Sprintf("parallel/rooms=one/dedupe/ordered=%v", ordered), func(b *testing.B) {
			s := history.NewRedis(client, history.RedisOptions{Prefix: redistest.Prefix(b), MaxLen: 1000})
			defer s.Close()
			var n atomic.Int64
			b.SetParallelism(64)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				stream := "s" + strconv.FormatInt(n.Add(1), 10)
				msg := &corralv1.Message{Room: "r", Sender: "u", Payload: benchPayload()}
				var place uint64
				for pb.Next() {
					place++
					key := stream + ":" + strconv.FormatUint(place, 10)
					var err error
					if ordered {
						_, err = s.AppendOrdered(ctx, "r", msg, key, history.Sender{Stream: stream, Seq: place}, history.State{})
					} else {
						_, err = s.Append(ctx, "r", msg, key)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportOps(b)
		})
	}
	b.Run("serial", func(b *testing.B) {
		s := history.NewRedis(client, history.RedisOptions{Prefix: redistest.Prefix(b), MaxLen: 1000})
		defer s.Close()
		msg := &corralv1.Message{Room: "r", Sender: "u", Payload: benchPayload()}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Append(ctx, "r", msg, ""); err != nil {
				b.Fatal(err)
			}
		}
		reportOps(b)
	})
}
