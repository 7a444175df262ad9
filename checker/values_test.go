package checker_test

import (
	"strings"
	"testing"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/delta"
)

func TestValues(t *testing.T) {
	v1 := []byte(strings.Repeat("state of the document, ", 5))
	v2 := append(append([]byte{}, v1...), "edited"...)
	v3 := []byte("short")
	full := map[uint64][]byte{1: v1, 2: v2, 3: v3}
	d12 := delta.Encode(v1, v2)
	tests := map[string]struct {
		updates []checker.Update
		want    string
	}{
		"full values": {updates: []checker.Update{{Version: 1, Value: v1}, {Version: 2, Value: v2}, {Version: 3, Value: v3}}},
		"a delta":     {updates: []checker.Update{{Version: 1, Value: v1}, {Version: 2, Delta: d12, IsDelta: true}, {Version: 3, Value: v3}}},
		"joined late": {updates: []checker.Update{{Version: 2, Value: v2}, {Version: 3, Value: v3}}},
		"delta against a version not held": {updates: []checker.Update{{Version: 1, Value: v1}, {Version: 3, Delta: d12, IsDelta: true}},
			want: "delta to version 3 from version 1"},
		"delta rebuilt wrong": {updates: []checker.Update{{Version: 1, Value: v3}, {Version: 2, Delta: d12, IsDelta: true}},
			want: "update 0: version 1 rebuilt"},
		"backwards": {updates: []checker.Update{{Version: 2, Value: v2}, {Version: 1, Value: v1}},
			want: "version 1 after 2"},
		"wrong value": {updates: []checker.Update{{Version: 1, Value: v2}}, want: "rebuilt as"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checker.Values(tc.updates, full)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Values = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAssembly(t *testing.T) {
	long := strings.Repeat("tokens ", 10)
	tests := map[string]struct {
		chunks []checker.Chunk
		want   string
		err    string
	}{
		"from the start": {chunks: []checker.Chunk{{Seq: 2, Version: 1, Data: []byte("Hel")}, {Seq: 5, Version: 2, Data: []byte("lo")},
			{Seq: 6, Version: 3, Data: []byte("!"), Final: true}}, want: "Hello!"},
		"joined mid-stream": {chunks: []checker.Chunk{{Seq: 5, Version: 2, Data: []byte("Hello"), Replace: true},
			{Seq: 6, Version: 3, Data: []byte("!"), Final: true}}, want: "Hello!"},
		"replace as delta": {chunks: []checker.Chunk{{Seq: 1, Version: 1, Data: []byte(long)},
			{Seq: 2, Version: 2, Replace: true, Final: true, Delta: delta.Encode([]byte(long), []byte(long+"end"))}}, want: long + "end"},
		"duplicate": {chunks: []checker.Chunk{{Seq: 2, Version: 1, Data: []byte("a")}, {Seq: 2, Version: 1, Data: []byte("a")},
			{Seq: 3, Version: 2, Data: []byte("b"), Final: true}}, want: "ab", err: "version 1 after 1"},
		"prefix then an old chunk again": {chunks: []checker.Chunk{{Seq: 5, Version: 2, Data: []byte("ab"), Replace: true},
			{Seq: 5, Version: 2, Data: []byte("b")}, {Seq: 6, Version: 3, Final: true}}, want: "ab", err: "version 2 after 2"},
		"gap": {chunks: []checker.Chunk{{Seq: 2, Version: 1, Data: []byte("a")}, {Seq: 4, Version: 3, Data: []byte("c"), Final: true}},
			want: "abc", err: "version 3 after 1"},
		"after final": {chunks: []checker.Chunk{{Seq: 2, Version: 1, Data: []byte("a"), Final: true}, {Seq: 3, Version: 2, Data: []byte("b")}},
			want: "ab", err: "after the final chunk"},
		"not final": {chunks: []checker.Chunk{{Seq: 2, Version: 1, Data: []byte("a")}}, want: "a", err: "final mark false"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checker.Assembly(tc.chunks, []byte(tc.want), true)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Assembly = %v, want %q", err, tc.err)
			}
		})
	}
}
