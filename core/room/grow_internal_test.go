package room

import (
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

func chunkMsg(seq, mseq, version uint64, data string, replace, final bool) *corralv1.Message {
	return &corralv1.Message{Room: "r", Id: "m", Seq: seq, Chunk: &corralv1.MessageChunk{
		MessageSeq: mseq, Version: version, Data: []byte(data), Replace: replace, Final: final}}
}

// TestFold: a prefix takes the chunks that follow it, ignores those it
// covers, starts from a first chunk or a replace, and is dropped at a gap.
func TestFold(t *testing.T) {
	prefix := chunkMsg(5, 1, 2, "ab", true, false)
	tests := map[string]struct {
		p, m      *corralv1.Message
		body      string // "" with nilWant
		seq, ver  uint64
		final     bool
		wantNil   bool
		unchanged bool
	}{
		"next chunk appends":         {p: prefix, m: chunkMsg(7, 1, 3, "c", false, false), body: "abc", seq: 7, ver: 3},
		"final chunk ends":           {p: prefix, m: chunkMsg(7, 1, 3, "c", false, true), body: "abc", seq: 7, ver: 3, final: true},
		"replace sets the body":      {p: prefix, m: chunkMsg(8, 1, 3, "xyz", true, false), body: "xyz", seq: 8, ver: 3},
		"covered chunk is ignored":   {p: prefix, m: chunkMsg(4, 1, 2, "b", false, false), unchanged: true},
		"a gap drops the prefix":     {p: prefix, m: chunkMsg(9, 1, 4, "d", false, false), wantNil: true},
		"first chunk opens":          {p: nil, m: chunkMsg(3, 3, 1, "hi", false, false), body: "hi", seq: 3, ver: 1},
		"later chunk without prefix": {p: nil, m: chunkMsg(3, 1, 2, "hi", false, false), wantNil: true},
		"a new message under the id": {p: prefix, m: chunkMsg(9, 9, 1, "new", false, false), body: "new", seq: 9, ver: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := fold(tc.p, tc.m)
			switch {
			case tc.wantNil:
				if got != nil {
					t.Fatalf("got %v, want nil", got)
				}
			case tc.unchanged:
				if got != tc.p {
					t.Fatalf("got %v, want the prefix unchanged", got)
				}
			default:
				c := got.GetChunk()
				if string(c.GetData()) != tc.body || got.GetSeq() != tc.seq || c.GetVersion() != tc.ver ||
					!c.GetReplace() || c.GetFinal() != tc.final {
					t.Fatalf("got %v", got)
				}
			}
			if tc.p != nil && string(tc.p.GetChunk().GetData()) != "ab" {
				t.Fatalf("fold changed the prefix: %v", tc.p)
			}
		})
	}
}
