package delta

// Choose is the "only when smaller" policy: it returns the delta from prev
// to next and true when that delta is shorter than next itself, else nil
// and false (send next whole). A reader that holds no previous value
// (a joiner, a key it never saw) gets the whole value: the caller passes
// prev only for a reader known to hold it.
func Choose(prev, next []byte) ([]byte, bool) {
	if len(prev) == 0 || len(next) < minUseful {
		return nil, false
	}
	d := Encode(prev, next)
	if len(d) >= len(next) {
		return nil, false
	}
	return d, true
}

// minUseful is the shortest value worth a delta: the smallest delta (a
// length, a newline, one copy, a checksum) is about 10 bytes.
const minUseful = 16
