package history_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/history"
)

// classLimits gives rooms "short:*" 2 messages for an hour; others keep
// the store's defaults.
func classLimits(room string) history.Limits {
	if strings.HasPrefix(room, "short:") {
		return history.Limits{MaxLen: 2, TTL: time.Hour}
	}
	return history.Limits{}
}

// TestMemoryRoomLimits: each room keeps its own number of messages and is
// forgotten after its own lifetime.
func TestMemoryRoomLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := history.NewMemory(history.MemoryOptions{MaxLen: 5, TTL: 24 * time.Hour, Limits: classLimits})
		mustAppend(t, s, "short:a", 4)
		mustAppend(t, s, "long", 4)
		for room, want := range map[string]int{"short:a": 2, "long": 4} {
			p, err := s.Read(ctx, history.Query{Room: room})
			if err != nil || len(p.Messages) != want || p.Last != 4 {
				t.Fatalf("%s: %d messages, last %d (%v); want %d, last 4", room, len(p.Messages), p.Last, err, want)
			}
		}
		before, _ := s.State(ctx, "short:a")
		time.Sleep(time.Hour + time.Minute)
		after, err := s.State(ctx, "short:a")
		if err != nil || after.Last != 0 || after.Epoch == before.Epoch {
			t.Fatalf("short:a past its hour: %+v (%v); want forgotten, a new epoch", after, err)
		}
		if st, _ := s.State(ctx, "long"); st.Last != 4 {
			t.Fatalf("long lost its history within its 24h: %+v", st)
		}
	})
}

// TestRedisRoomLimits: the room's own TTL is on its keys, and its own
// MaxLen trims its stream.
func TestRedisRoomLimits(t *testing.T) {
	s, client, _ := newRedis(t, history.RedisOptions{Prefix: "lim", TTL: 24 * time.Hour, Limits: classLimits})
	ctx := context.Background()
	const n = 250 // trimming is approximate (whole stream nodes of 100)
	mustAppend(t, s, "short:a", n)
	mustAppend(t, s, "long", n)
	for key, want := range map[string]time.Duration{
		"lim:{short:a}:seq": time.Hour, "lim:{short:a}:log": time.Hour, "lim:{short:a}:epoch": time.Hour,
		"lim:{long}:seq": 24 * time.Hour, "lim:{long}:log": 24 * time.Hour,
	} {
		ms, err := client.Do(ctx, client.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(ms) * time.Millisecond; got <= want-time.Minute || got > want {
			t.Errorf("PTTL %s = %v, want about %v", key, got, want)
		}
	}
	short, err := client.Do(ctx, client.B().Xlen().Key("lim:{short:a}:log").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	long, err := client.Do(ctx, client.B().Xlen().Key("lim:{long}:log").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if short >= n || long != n {
		t.Errorf("XLEN short:a %d (want trimmed below %d), long %d (want %d)", short, n, long, n)
	}
}
