package delta_test

import (
	"strings"
	"testing"

	"github.com/corral-rt/corral/delta"
)

// A 4 KiB document with one small edit: the keyed-state case deltas are
// for. (Smoke-run in CI with -benchtime=1x; figures from a quiet machine
// only.)
var (
	benchPrev = []byte(strings.Repeat("a line of a shared document, edited by many; ", 90))
	benchNext = []byte(strings.Replace(string(benchPrev), "edited", "written", 1))
)

func BenchmarkEncode(b *testing.B) {
	b.SetBytes(int64(len(benchNext)))
	for b.Loop() {
		delta.Encode(benchPrev, benchNext)
	}
}

func BenchmarkApply(b *testing.B) {
	d := delta.Encode(benchPrev, benchNext)
	b.SetBytes(int64(len(benchNext)))
	for b.Loop() {
		if _, err := delta.Apply(benchPrev, d, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
