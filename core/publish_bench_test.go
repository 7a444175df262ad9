package core_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/core"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/sessions"
)

var publishRate = flag.Int("publish-rate", 25000, "publishes per second for BenchmarkPublishLatency")

// newCore starts a core on the named store ("memory" or "redis").
func newCore(b *testing.B, store string) *core.Core {
	b.Helper()
	cfg := core.Config{}
	if store == "redis" {
		client := redistest.Client(b, redistest.Start(b))
		prefix := redistest.Prefix(b)
		h := history.NewRedis(client, history.RedisOptions{Prefix: prefix})
		s := sessions.NewRedis(client, sessions.Options{Prefix: prefix})
		b.Cleanup(func() { s.Close(); h.Close() })
		cfg.History, cfg.Sessions = h, s
	}
	c, err := core.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkPublish measures persisted publishes per second through the core
// (internal API, no network hop in front), 64 concurrent publishers over
// 100 rooms.
func BenchmarkPublish(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run(store, func(b *testing.B) {
			c := newCore(b, store)
			payload := []byte(`{"text":"a chat message of ordinary length, about eighty bytes"}`)
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := n.Add(1)
					_, err := c.API().Publish(context.Background(), &corralv1.PublishRequest{
						Room: fmt.Sprintf("room-%d", k%100), Payload: payload,
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "publishes/s")
		})
	}
}

// BenchmarkPublishLatency publishes at a fixed rate (-publish-rate) for
// b.N publishes and reports the latency percentiles of each call.
func BenchmarkPublishLatency(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run(store, func(b *testing.B) {
			c := newCore(b, store)
			payload := []byte(`{"text":"a chat message of ordinary length, about eighty bytes"}`)
			interval := time.Second / time.Duration(*publishRate)
			lat := make([]time.Duration, b.N)
			var wg sync.WaitGroup
			sem := make(chan struct{}, 4096) // bounded in-flight
			b.ResetTimer()
			begin := time.Now()
			for i := range b.N {
				// Open-loop schedule: send i at begin + i*interval.
				if d := time.Until(begin.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d)
				}
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem; wg.Done() }()
					t0 := time.Now()
					_, err := c.API().Publish(context.Background(), &corralv1.PublishRequest{
						Room: fmt.Sprintf("room-%d", i%100), Payload: payload,
					})
					lat[i] = time.Since(t0)
					if err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(begin)
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "publishes/s")
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(q(1), "max-ms")
		})
	}
}
