package core

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/corral-rt/corral/core/replay"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redistest"
)

// BenchmarkReplayStorm is a rejoin storm's replay reads: 10,000 joins at
// once over 100 rooms, each missed a few of its room's last messages (one
// query), through the batched reads (core/replay.Reads.Read) with a batch of max
// calls; max 16384 takes the whole queue, as the unbounded batcher did.
// It reports the ReadMany calls and queries each storm cost the store.
func BenchmarkReplayStorm(b *testing.B) {
	const joins, rooms, published = 10000, 100, 20
	for _, store := range []string{"memory", "redis"} {
		for _, max := range []int{256, 1024, 16384} {
			b.Run(fmt.Sprintf("%s/max=%d", store, max), func(b *testing.B) {
				var hist history.Store = history.NewMemory(history.MemoryOptions{})
				if store == "redis" {
					client := redistest.Client(b, redistest.Start(b))
					hist = history.NewRedis(client, history.RedisOptions{Prefix: redistest.Prefix(b)})
				}
				h := &countingHistory{Store: hist}
				b.Cleanup(func() { h.Close() })
				c := New(Config{History: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				b.Cleanup(func() { c.Close() })
				c.missed.Close()
				c.missed = c.newMissedReads(max, replay.MaxQueued)
				ctx := context.Background()
				for r := range rooms {
					appendN(b, h, fmt.Sprintf("room-%d", r), published)
				}
				h.calls.Store(0)
				h.queries.Store(0)
				b.ResetTimer()
				for range b.N {
					var wg sync.WaitGroup
					for i := range joins {
						wg.Go(func() {
							after := uint64(published - 1 - i%10)
							q := history.Query{Room: fmt.Sprintf("room-%d", i%rooms), After: after, Limit: int(published - after)}
							pages, err := c.missed.Read(ctx, []history.Query{q})
							if err != nil || len(pages[0].Messages) != q.Limit {
								b.Errorf("%+v: %v", q, err)
							}
						})
					}
					wg.Wait()
				}
				b.ReportMetric(float64(h.calls.Load())/float64(b.N), "readmany/storm")
				b.ReportMetric(float64(h.queries.Load())/float64(b.N), "queries/storm")
			})
		}
	}
}

// countingHistory counts the ReadMany calls and their queries.
type countingHistory struct {
	history.Store
	calls, queries atomic.Int64
}

func (h *countingHistory) ReadMany(ctx context.Context, qs []history.Query) ([]history.Page, error) {
	h.calls.Add(1)
	h.queries.Add(int64(len(qs)))
	return h.Store.ReadMany(ctx, qs)
}
