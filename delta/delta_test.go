package delta_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/corral-rt/corral/delta"
)

// pairs are (source, target) cases both the round trip and the JS
// fixture (fixture_test.go) use.
func pairs() []struct{ name, src, target string } {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	return []struct{ name, src, target string }{
		{"empty both", "", ""},
		{"empty source", "", "hello"},
		{"empty target", "hello, world, hello", ""},
		{"short source", "abc", "abcdef"},
		{"same", long, long},
		{"append", long, long + "And then some more words at the end."},
		{"prepend", long, "A new start. " + long},
		{"middle edit", long, strings.Replace(long, "lazy", "sleepy", 7)},
		{"truncate", long, long[:len(long)/2]},
		{"unrelated", long, strings.Repeat("0123456789", 30)},
		{"json doc", `{"title":"Draft","body":"` + long + `","tags":["a","b"]}`,
			`{"title":"Final","body":"` + long + `","tags":["a","b","c"]}`},
		{"binary", string([]byte{0, 1, 2, 255, 254, 10, 59, 64, 44, 58}) + long,
			long + string([]byte{0, 1, 2, 255, 254, 10, 59, 64, 44, 58})},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, p := range pairs() {
		t.Run(p.name, func(t *testing.T) {
			d := delta.Encode([]byte(p.src), []byte(p.target))
			got, err := delta.Apply([]byte(p.src), d, len(p.target))
			if err != nil {
				t.Fatalf("Apply: %v (delta %q)", err, d)
			}
			if string(got) != p.target {
				t.Fatalf("Apply = %q, want %q", got, p.target)
			}
		})
	}
}

// TestEditsSmaller checks that a small edit of a long value gives a delta
// much smaller than the value, so Choose picks it.
func TestEditsSmaller(t *testing.T) {
	long := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20))
	next := append(append([]byte{}, long...), " More."...)
	d, ok := delta.Choose(long, next)
	if !ok || len(d) > 40 {
		t.Fatalf("Choose = %q, %v: want a delta under 40 bytes", d, ok)
	}
	if _, ok := delta.Choose(long, []byte(strings.Repeat("z", 100))); ok {
		t.Fatal("Choose took a delta for an unrelated value")
	}
	if _, ok := delta.Choose(nil, next); ok {
		t.Fatal("Choose took a delta with no previous value")
	}
}

func TestRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		src := make([]byte, rng.IntN(3000))
		for j := range src {
			src[j] = byte('a' + rng.IntN(4)) // few letters: many false block matches
		}
		target := append([]byte{}, src...)
		for range rng.IntN(8) {
			at := rng.IntN(len(target) + 1)
			switch rng.IntN(3) {
			case 0:
				ins := make([]byte, rng.IntN(40))
				for j := range ins {
					ins[j] = byte(rng.IntN(256))
				}
				target = append(target[:at], append(ins, target[at:]...)...)
			case 1:
				end := min(len(target), at+rng.IntN(60))
				target = append(target[:at], target[end:]...)
			default:
				end := min(len(target), at+rng.IntN(60))
				for j := at; j < end; j++ {
					target[j] ^= 0x20
				}
			}
		}
		d := delta.Encode(src, target)
		got, err := delta.Apply(src, d, 0)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("case %d: Apply = %q, %v; want the target", i, got, err)
		}
	}
}

func TestApplyRefuses(t *testing.T) {
	src := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	good := delta.Encode(src, []byte("0123456789abcdefghijklmnopqrstuvwxyz!"))
	for name, d := range map[string]string{
		"empty":            "",
		"no newline":       "5",
		"unterminated":     "5\n5:hello",
		"copy past source": "5\n5@40,",
		"insert past end":  "5\n9:hello",
		"longer than said": "3\n5:hello0;",
		"bad checksum":     "5\n5:hello0;",
		"unknown command":  "5\n5!hello",
		"trailing bytes":   string(good) + "x",
		"number too long":  "zzzzzzzzzzzz\n",
		"over the bound":   "~~~~\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := delta.Apply(src, []byte(d), 1<<16); !errors.Is(err, delta.ErrBad) {
				t.Fatalf("Apply(%q) err = %v, want ErrBad", d, err)
			}
		})
	}
}

// FuzzApply checks that Apply never panics on any delta, allocates within
// its bound, and that what it accepts is the target the delta declares.
func FuzzApply(f *testing.F) {
	for _, p := range pairs() {
		f.Add([]byte(p.src), delta.Encode([]byte(p.src), []byte(p.target)))
	}
	f.Add([]byte("abc"), []byte("3\n3@0,2S;"))
	f.Add([]byte(""), []byte("~~~~~~~~~~\n"))
	f.Fuzz(func(t *testing.T, src, d []byte) {
		const bound = 1 << 16
		out, err := delta.Apply(src, d, bound)
		if err != nil {
			if !errors.Is(err, delta.ErrBad) {
				t.Fatalf("error %v does not wrap ErrBad", err)
			}
			return
		}
		if len(out) > bound {
			t.Fatalf("%d bytes past the bound", len(out))
		}
		// Re-encoding what was accepted round-trips.
		again, err := delta.Apply(src, delta.Encode(src, out), bound)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("re-encoded delta: %q, %v", again, err)
		}
	})
}

// FuzzEncode checks the encoder against the decoder on any pair.
func FuzzEncode(f *testing.F) {
	for _, p := range pairs() {
		f.Add([]byte(p.src), []byte(p.target))
	}
	f.Fuzz(func(t *testing.T, src, target []byte) {
		got, err := delta.Apply(src, delta.Encode(src, target), 0)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("round trip: %q, %v", got, err)
		}
	})
}
