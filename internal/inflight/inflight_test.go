package inflight_test

import (
	"testing"

	"github.com/corral-rt/corral/internal/inflight"
)

func TestLimit(t *testing.T) {
	l := inflight.New(2)
	if !l.TryAcquire() || !l.TryAcquire() {
		t.Fatal("refused below the bound")
	}
	if l.TryAcquire() {
		t.Fatal("admitted past the bound")
	}
	if l.InFlight() != 2 {
		t.Fatalf("in flight %d, want 2", l.InFlight())
	}
	l.Release()
	if !l.TryAcquire() {
		t.Fatal("refused after a release")
	}
}
