package presence

import (
	"strconv"
	"testing"
)

// FuzzDecodeChange: a pub/sub message never panics the decoder, and what
// it accepts is a well-formed change that encodes back the same.
func FuzzDecodeChange(f *testing.F) {
	for _, s := range []string{"1|1|1|5|alice", `2|7|2|3|bob{"c":1}`, "3|9|0|0|", "", "1|", "4|1|1|1|a", "1|1|1|9|short", "1|-1|1|1|a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		ch, ok := decodeChange("r", msg)
		if !ok {
			return
		}
		if ch.Kind < Joined || ch.Kind > Left || ch.Member.Conns < 0 {
			t.Fatalf("accepted %+v", ch)
		}
		back := strconv.Itoa(int(ch.Kind)) + "|" + strconv.FormatUint(ch.Version, 10) + "|" + strconv.Itoa(ch.Member.Conns) +
			"|" + strconv.Itoa(len(ch.Member.User)) + "|" + ch.Member.User + string(ch.Member.State)
		if again, ok := decodeChange("r", back); !ok || again.Member.User != ch.Member.User || string(again.Member.State) != string(ch.Member.State) {
			t.Fatalf("%q re-encoded as %q decodes to %+v", msg, back, again)
		}
	})
}
