package sessions_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/sessions"
)

// BenchmarkRedisRejoin measures what a rejoin costs the sessions store
// (Create, then SetRoom at the client's position, then Touch) with many
// clients rejoining at once, as in a reconnect storm: the process's CPU
// and Redis's CPU per rejoin, besides the time.
func BenchmarkRedisRejoin(b *testing.B) {
	addr := redistest.Start(b)
	client := redistest.Client(b, addr)
	s := sessions.NewRedis(client, sessions.Options{Prefix: redistest.Prefix(b), FlushInterval: time.Hour})
	defer s.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(64) // 64 × GOMAXPROCS clients at once
	cpu0, redis0 := processCPU(), redisCPU(b, client)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			sess, err := s.Create(ctx, "u")
			if err != nil {
				b.Error(err)
				return
			}
			room := "r" + strconv.FormatInt(i%100, 10)
			if err := s.SetRoom(ctx, sess.ID, room, sessions.Position{Seq: uint64(i), Epoch: "e"}); err != nil {
				b.Error(err)
				return
			}
			if err := s.Touch(ctx, sess.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(redisCPU(b, client)-redis0)/float64(time.Microsecond)/float64(b.N), "redis-cpu-us/op")
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is the Redis server's user and system CPU time so far.
func redisCPU(b *testing.B, client rueidis.Client) time.Duration {
	info, err := client.Do(context.Background(), client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
