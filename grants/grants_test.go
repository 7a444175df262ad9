package grants_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/redis/rueidis"
)

func TestAllows(t *testing.T) {
	g := &grants.Grants{Join: []string{"vip:*"}, JoinRevoked: []string{"lobby", "vip:secret"}, Publish: []string{"chat"}}
	tests := map[string]struct {
		kind  grants.Kind
		token []string
		room  string
		want  bool
	}{
		"token grants":            {grants.Join, []string{"game:*"}, "game:1", true},
		"run-time grant":          {grants.Join, nil, "vip:1", true},
		"neither":                 {grants.Join, []string{"game:*"}, "other", false},
		"revoked beats token":     {grants.Join, []string{"*"}, "lobby", false},
		"revoked beats grant":     {grants.Join, nil, "vip:secret", false},
		"publish apart from join": {grants.Publish, nil, "vip:1", false},
		"publish grant":           {grants.Publish, nil, "chat", true},
		"join revocation only":    {grants.Publish, []string{"lobby"}, "lobby", true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := grants.Allows(g, tt.kind, tt.token, tt.room); got != tt.want {
				t.Fatalf("Allows = %v, want %v", got, tt.want)
			}
		})
	}
	if grants.Allows(nil, grants.Join, []string{"a"}, "a") != true || grants.Allows(nil, grants.Join, nil, "a") {
		t.Fatal("nil grants: the token alone decides")
	}
}

func TestStores(t *testing.T) {
	stores := map[string]func(t *testing.T) grants.Store{
		"memory": func(*testing.T) grants.Store { return grants.NewMemory() },
		"redis": func(t *testing.T) grants.Store {
			addr := redistest.Start(t)
			return grants.NewRedis(redistest.Client(t, addr), grants.RedisOptions{Prefix: redistest.Prefix(t)})
		},
		"cluster": func(t *testing.T) grants.Store {
			client := redistest.StartCluster(t).Client(t)
			return grants.NewRedis(client, grants.RedisOptions{Prefix: redistest.Prefix(t)})
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			var mu sync.Mutex
			changed := map[string]int{}
			s.Watch(func(user string) {
				mu.Lock()
				changed[user]++
				mu.Unlock()
			})
			ctx := context.Background()
			// The Redis store subscribes in the background: until it hears
			// a change, announcements may pass it by.
			heard := func() bool {
				mu.Lock()
				defer mu.Unlock()
				return changed["warm-up"] > 0
			}
			for i := 0; ; i++ {
				if err := s.Grant(ctx, "warm-up", []string{"x"}, nil); err != nil {
					t.Fatal(err)
				}
				if eventually.Within(10*time.Millisecond, heard) {
					break
				}
				if i == 500 {
					t.Fatal("the store never heard of its own change")
				}
			}
			if g, err := s.Get(ctx, "ann"); err != nil || g != nil {
				t.Fatalf("empty store: %v %v", g, err)
			}
			if err := s.Revoke(ctx, "ann", []string{"game:*"}, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Grant(ctx, "ann", []string{"game:1"}, []string{"chat"}); err != nil {
				t.Fatal(err)
			}
			g, err := s.Get(ctx, "ann")
			if err != nil {
				t.Fatal(err)
			}
			// A narrower grant does not lift a broader revocation.
			if grants.Allows(g, grants.Join, nil, "game:1") || !grants.Allows(g, grants.Publish, nil, "chat") {
				t.Fatalf("after revoke game:*, grant game:1: %+v", g)
			}
			if err := s.Grant(ctx, "ann", []string{"game:*"}, nil); err != nil {
				t.Fatal(err)
			}
			if g, _ = s.Get(ctx, "ann"); !grants.Allows(g, grants.Join, nil, "game:2") {
				t.Fatalf("a broader grant lifts the revocation: %+v", g)
			}
			if err := s.Revoke(ctx, "ann", []string{"game:*"}, []string{"chat"}); err != nil {
				t.Fatal(err)
			}
			if g, _ = s.Get(ctx, "ann"); len(g.Join) != 0 || len(g.Publish) != 0 {
				t.Fatalf("revoke removes the grants it matches: %+v", g)
			}
			if err := s.Grant(ctx, "", []string{"a"}, nil); !errors.Is(err, grants.ErrInvalid) {
				t.Fatalf("no user: %v", err)
			}
			if err := s.Grant(ctx, "ann", nil, nil); !errors.Is(err, grants.ErrInvalid) {
				t.Fatalf("no pattern: %v", err)
			}
			eventually.True(t, 5*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return changed["ann"] >= 4
			}, "watch saw 4 changes of ann")
		})
	}
}

// TestRedisShared: a change made through one store is seen through
// another at once (announced), not only after the cache TTL. On Redis
// Cluster the announcement is a plain PUBLISH, which every node relays.
func TestRedisShared(t *testing.T) {
	deployments := map[string]func() (rueidis.Client, rueidis.Client){
		"redis": func() (rueidis.Client, rueidis.Client) {
			addr := redistest.Start(t)
			return redistest.Client(t, addr), redistest.Client(t, addr)
		},
		"cluster": func() (rueidis.Client, rueidis.Client) {
			c := redistest.StartCluster(t)
			return c.Client(t), c.Client(t)
		},
	}
	for name, clients := range deployments {
		t.Run(name, func(t *testing.T) {
			ca, cb := clients()
			testShared(t, ca, cb)
		})
	}
}

func testShared(t *testing.T, ca, cb rueidis.Client) {
	prefix := redistest.Prefix(t)
	a := grants.NewRedis(ca, grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
	b := grants.NewRedis(cb, grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
	t.Cleanup(func() { a.Close(); b.Close() })
	heard := make(chan string, 8)
	b.Watch(func(user string) { heard <- user })
	ctx := context.Background()
	warmUp(t, a, heard)
	// Fill b's cache with "nothing" first.
	if g, err := b.Get(ctx, "cam"); err != nil || g != nil {
		t.Fatal(g, err)
	}
	if err := a.Grant(ctx, "cam", []string{"stage"}, nil); err != nil {
		t.Fatal(err)
	}
	for u := ""; u != "cam"; {
		select {
		case u = <-heard:
		case <-time.After(5 * time.Second):
			t.Fatal("b never heard of cam's change")
		}
	}
	g, err := b.Get(ctx, "cam")
	if err != nil || !grants.Allows(g, grants.Join, nil, "stage") {
		t.Fatalf("b reads %+v, %v", g, err)
	}
}

// warmUp returns once the store whose watcher feeds heard has heard a
// change made through a: it subscribes in the background, and until then
// changes may pass it by.
func warmUp(t *testing.T, a grants.Store, heard <-chan string) {
	t.Helper()
	for i := 0; ; i++ {
		if err := a.Grant(context.Background(), "warm-up", []string{"x"}, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-heard:
			return
		case <-time.After(100 * time.Millisecond):
			if i >= 50 {
				t.Fatal("never heard of a change")
			}
		}
	}
}

// TestRedisResubscribeRechecks: when the store's subscription to the
// announcements breaks and comes back, changes made meanwhile may have
// been missed, so it drops its cache and tells the watcher to check every
// user (grants.AnyUser); a revocation missed that way still removes
// members.
func TestRedisResubscribeRechecks(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a := grants.NewRedis(redistest.Client(t, addr), grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
	b := grants.NewRedis(redistest.Client(t, addr), grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
	t.Cleanup(func() { a.Close(); b.Close() })
	heard := make(chan string, 64)
	b.Watch(func(user string) {
		select {
		case heard <- user:
		default:
		}
	})
	warmUp(t, a, heard)
	ctx := context.Background()
	if g, err := b.Get(ctx, "cam"); err != nil || g != nil {
		t.Fatal(g, err) // cached for an hour: only an announcement or a resubscription refreshes it
	}
	killer := redistest.Client(t, addr)
	if err := killer.Do(ctx, killer.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// a's own connection carried its subscription too and was killed:
	// its first command may meet the broken connection.
	eventually.NoError(t, time.Second, func() error { return a.Grant(ctx, "cam", []string{"stage"}, nil) })
	for u := "cam"; u != grants.AnyUser; {
		select {
		case u = <-heard:
		case <-time.After(10 * time.Second):
			t.Fatal("the watcher was not told to check every user after the subscription came back")
		}
	}
	g, err := b.Get(ctx, "cam")
	if err != nil || !grants.Allows(g, grants.Join, nil, "stage") {
		t.Fatalf("after resubscribing b reads %+v, %v", g, err)
	}
}

// TestRedisCacheForgets: the cache holds the users checked lately, not
// every user ever checked: after a churn of distinct users and a TTL, the
// next check sweeps the others out.
func TestRedisCacheForgets(t *testing.T) {
	addr := redistest.Start(t)
	const ttl = 50 * time.Millisecond
	r := grants.NewRedis(redistest.Client(t, addr), grants.RedisOptions{Prefix: redistest.Prefix(t), TTL: ttl})
	defer r.Close()
	var now atomic.Int64 // the cache's clock, in ns since start
	start := time.Now()
	grants.SetNow(r, func() time.Time { return start.Add(time.Duration(now.Load())) })
	ctx := context.Background()
	const users = 2000
	for i := range users {
		if _, err := r.Get(ctx, fmt.Sprintf("user%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := grants.CacheLen(r); n == 0 {
		t.Fatal("the cache holds no user just checked: it does not cache")
	}
	now.Add(int64(2 * ttl))
	if _, err := r.Get(ctx, "last"); err != nil {
		t.Fatal(err)
	}
	if n := grants.CacheLen(r); n != 1 {
		t.Fatalf("a TTL after the churn the cache holds %d users, want 1", n)
	}
}

// TestRedisBatchedGets: users checked at once are read together (one
// pipeline per batch, on a cluster too); each caller gets its own user's
// grants, and a user whose stored value is corrupt fails alone.
func TestRedisBatchedGets(t *testing.T) {
	for name, open := range redistest.Topologies() {
		t.Run(name, func(t *testing.T) {
			client := open(t)
			prefix := redistest.Prefix(t)
			r := grants.NewRedis(client, grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
			defer r.Close()
			ctx := context.Background()
			const users = 300
			for i := range users {
				if i%3 == 0 {
					if err := r.Grant(ctx, fmt.Sprintf("u%d", i), []string{fmt.Sprintf("room-%d", i)}, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			bad := prefix + ":grants:{u7}"
			if err := client.Do(ctx, client.B().Set().Key(bad).Value("not json").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			r2 := grants.NewRedis(client, grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
			defer r2.Close()
			var wg sync.WaitGroup
			errs := make(chan error, users)
			for i := range users {
				wg.Add(1)
				go func() {
					defer wg.Done()
					g, err := r2.Get(ctx, fmt.Sprintf("u%d", i))
					switch {
					case i == 7:
						if err == nil {
							errs <- fmt.Errorf("u7's corrupt value read without error")
						}
					case err != nil:
						errs <- fmt.Errorf("u%d: %w", i, err)
					case i%3 == 0 && (g == nil || len(g.Join) != 1 || g.Join[0] != fmt.Sprintf("room-%d", i)):
						errs <- fmt.Errorf("u%d: got %+v, want its own grant", i, g)
					case i%3 != 0 && g != nil:
						errs <- fmt.Errorf("u%d: got %+v, want none", i, g)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestRedisSecondStoreSubscribesDuringBurst: a second store on the same
// client subscribes to the grants channel while the first one's
// announcements stream in. Its reads, and the first store's, must still be
// answered: a subscription on the client's shared connection, its buffer
// full before its SUBSCRIBE reply, stopped every command on it.
func TestRedisSecondStoreSubscribesDuringBurst(t *testing.T) {
	for name, open := range redistest.Topologies() {
		t.Run(name, func(t *testing.T) {
			client := open(t)
			prefix := redistest.Prefix(t)
			r := grants.NewRedis(client, grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// The rounds run on a goroutine of their own: a stopped
			// connection ignores ctx, and the test must fail, not hang
			// until the package's timeout.
			failed := make(chan error, 1)
			go func() {
				failed <- burstRounds(ctx, client, r, prefix)
			}()
			select {
			case err := <-failed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("the rounds hung past 60s (their context ends at 20s): a subscription stopped the client's shared connection")
			}
		})
	}
}

// burstRounds is TestRedisSecondStoreSubscribesDuringBurst's five rounds:
// 200 grants at once on r, a second store opened meanwhile, then a read on
// each.
func burstRounds(ctx context.Context, client rueidis.Client, r *grants.Redis, prefix string) error {
	for round := range 5 {
		// 200 grants at once: their announcements arrive in a burst.
		done := make(chan error, 200)
		for i := range 200 {
			go func() {
				done <- r.Grant(ctx, fmt.Sprintf("u%d-%d", round, i), []string{"room"}, nil)
			}()
		}
		r2 := grants.NewRedis(client, grants.RedisOptions{Prefix: prefix, TTL: time.Hour})
		for range 200 {
			if err := <-done; err != nil {
				r2.Close()
				return fmt.Errorf("round %d: grant: %w", round, err)
			}
		}
		for _, s := range []*grants.Redis{r, r2} {
			g, err := s.Get(ctx, fmt.Sprintf("u%d-199", round))
			if err != nil || g == nil {
				r2.Close()
				return fmt.Errorf("round %d: get after the burst: %+v, %v", round, g, err)
			}
		}
		r2.Close()
	}
	return nil
}

// TestMemoryMaxUsers: a flood of grants and revocations for distinct
// users never makes the memory store hold more than its bound; past it a
// change for a new user is refused with ErrFull (counted), and nothing
// it holds is forgotten: a revocation stays in force, and a held user's
// grants still change.
func TestMemoryMaxUsers(t *testing.T) {
	ctx := context.Background()
	m := grants.NewMemoryMax(100)
	if err := m.Revoke(ctx, "banned", []string{"lobby"}, nil); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := range 1000 {
		var err error
		if i%2 == 0 {
			err = m.Grant(ctx, fmt.Sprint("u", i), []string{"r"}, nil)
		} else {
			err = m.Revoke(ctx, fmt.Sprint("u", i), []string{"r"}, nil)
		}
		if errors.Is(err, grants.ErrFull) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
		if n := m.Len(); n > 100 {
			t.Fatalf("after %d changes %d users held, over the bound", i+1, n)
		}
	}
	if refused != 901 || m.Refused() != 901 {
		t.Fatalf("%d refused (counted %d), want 901", refused, m.Refused())
	}
	g, _ := m.Get(ctx, "banned")
	if g == nil || len(g.JoinRevoked) != 1 {
		t.Fatalf("the revocation was forgotten: %+v", g)
	}
	if err := m.Grant(ctx, "u0", []string{"more"}, nil); err != nil {
		t.Fatalf("a held user's change refused: %v", err)
	}
}
