package hooks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/hooks"
)

// handlerClient sends each request to a handler in memory, so that the
// whole call runs inside a synctest bubble.
type handlerClient struct{ h http.Handler }

func (c handlerClient) Do(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// startInMemory returns a client of b that calls it in memory; call it
// inside a synctest bubble.
func startInMemory(t *testing.T, b *backend, tune func(*hooks.Config)) *hooks.Client {
	t.Helper()
	return newClient(t, hooks.Config{Hooks: config.Hooks{URL: "http://backend.test", Timeout: 5 * time.Second}, HTTPClient: handlerClient{backendMux(b)}}, tune)
}

// joinAtRate starts n one-pair joins, every gap, and returns the longest
// any of them waited for its answer.
func joinAtRate(t *testing.T, c *hooks.Client, n int, gap time.Duration) time.Duration {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		longest time.Duration
	)
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			if _, err := c.Join(context.Background(), []*corralv1.JoinPair{{UserId: fmt.Sprint("u", i), Room: "a"}}, nil); err != nil {
				t.Error(err)
			}
			mu.Lock()
			longest = max(longest, time.Since(start))
			mu.Unlock()
		})
		time.Sleep(gap)
	}
	wg.Wait()
	return longest
}

// TestHerdLoneJoinWaitsJoinWindow: at a quiet rate a join waits
// JoinWindow, not the herd window.
func TestHerdLoneJoinWaitsJoinWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		c := startInMemory(t, b, nil)
		for range 3 {
			if got := joinAtRate(t, c, 1, time.Second); got != 2*time.Millisecond {
				t.Fatalf("a lone join waited %v, want the 2ms JoinWindow", got)
			}
		}
		if got := b.joinCalls.Load(); got != 3 {
			t.Fatalf("%d Join calls for 3 lone joins, want 3", got)
		}
	})
}

// TestHerdFillsBatches: 1,000 joins arriving at 2,000/s (a herd: 200
// pairs come within 100ms) share about 10 calls (10 today), none waiting more than
// the herd window.
func TestHerdFillsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		c := startInMemory(t, b, nil)
		longest := joinAtRate(t, c, 1000, 500*time.Microsecond)
		if got := b.joinPairs.Load(); got != 1000 {
			t.Fatalf("backend saw %d pairs, want 1000", got)
		}
		calls := b.joinCalls.Load()
		t.Logf("%d Join calls, longest wait %v", calls, longest)
		// Five full batches of 200, and a few small ones while the rate
		// rises past the herd's (the 2ms window then).
		if calls > 12 {
			t.Fatalf("%d Join calls for 1,000 joins at 2,000/s, want at most 12", calls)
		}
		if longest > 250*time.Millisecond {
			t.Fatalf("a join waited %v, more than the 250ms herd window", longest)
		}
	})
}

// TestHerdWindowOff: with the herd window off every batch waits
// JoinWindow whatever the rate, as before herds were seen.
func TestHerdWindowOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{}
		c := startInMemory(t, b, func(cfg *hooks.Config) { cfg.JoinHerdWindow = -1 })
		// Joins every 0.7ms: a 2ms window takes 3 of them.
		longest := joinAtRate(t, c, 1000, 700*time.Microsecond)
		if want := int64((1000 + 2) / 3); b.joinCalls.Load() != want {
			t.Fatalf("%d Join calls, want %d (3 joins per 2ms window)", b.joinCalls.Load(), want)
		}
		if longest != 2*time.Millisecond {
			t.Fatalf("longest wait %v, want the 2ms JoinWindow", longest)
		}
	})
}
