package redisguard

import (
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
