package redisguard

import (
	"slices"
	"testing"
	"time"
)

func TestBlockTime(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want time.Duration
		ok   bool
	}{
		"xread block":      {[]string{"XREAD", "COUNT", "100", "BLOCK", "1500", "STREAMS", "k", "0-0"}, 1500 * time.Millisecond, true},
		"xread block 0":    {[]string{"XREAD", "BLOCK", "0", "STREAMS", "k", "$"}, 0, false},
		"xreadgroup":       {[]string{"XREADGROUP", "GROUP", "g", "c", "BLOCK", "20", "STREAMS", "k", ">"}, 20 * time.Millisecond, true},
		"wait":             {[]string{"WAIT", "1", "250"}, 250 * time.Millisecond, true},
		"wait forever":     {[]string{"WAIT", "1", "0"}, 0, false},
		"blpop seconds":    {[]string{"BLPOP", "a", "b", "1.5"}, 1500 * time.Millisecond, true},
		"unknown blocking": {[]string{"MODULE.BLOCK", "x"}, 0, false},
		"empty":            {nil, 0, false},
	} {
		got, ok := blockTime(tc.args)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: blockTime(%q) = %v, %v; want %v, %v", name, tc.args, got, ok, tc.want, tc.ok)
		}
	}
}

func TestClusterMasters(t *testing.T) {
	nodes := "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n" +
		"b2 127.0.0.1:7001@17001 master,fail - 0 0 2 disconnected\n" +
		"c3 127.0.0.1:7002@17002 master,fail? - 0 0 3 connected 10923-16383\n" +
		"d4 127.0.0.1:7003@17003 slave a1 0 0 1 connected\n" +
		"e5 127.0.0.1:7004@17004 master - 0 0 4 connected 5461-10922\n"
	got := clusterMasters(nodes)
	want := []string{"a1", "c3", "e5"}
	if !slices.Equal(got, want) {
		t.Fatalf("masters %v, want %v", got, want)
	}
}
