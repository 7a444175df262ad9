package presence

import (
	"strconv"
	"testing"
)

// FuzzDecodeChange: a pub/sub message never panics the decoder, and what
// it accepts is a well-formed change that encodes back the same.
func FuzzDecodeChange(f *testing.F) {
	for _, s := range []string{"1|1|1|5|alice", `2|7|2|3|bob{"c":1}`, "3|9|0|0|", "", "1|", "4|1|1|1|a", "1|1|1|9|short", "1|-1|1|1|a",
		`i|1|2|1|5|9|alice{"n":"A"}{"c":1}`, "i|2|3|1|3|0|bob", "i|1|1|1|1|5|ab", "i|i|1|1|1|1|1|ab"} {
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
		if len(ch.Member.Info) > 0 {
			back = "i|" + strconv.Itoa(int(ch.Kind)) + "|" + strconv.FormatUint(ch.Version, 10) + "|" + strconv.Itoa(ch.Member.Conns) +
				"|" + strconv.Itoa(len(ch.Member.User)) + "|" + strconv.Itoa(len(ch.Member.Info)) + "|" + ch.Member.User + string(ch.Member.Info) + string(ch.Member.State)
		}
		if again, ok := decodeChange("r", back); !ok || again.Member.User != ch.Member.User || string(again.Member.State) != string(ch.Member.State) ||
			string(again.Member.Info) != string(ch.Member.Info) {
			t.Fatalf("%q re-encoded as %q decodes to %+v", msg, back, again)
		}
	})
}
