package core

import (
	"testing"
	"time"
)

func TestSignalTick(t *testing.T) {
	c := &Core{cfg: Config{SignalTick: 33 * time.Millisecond, SignalTicks: []RoomTick{
		{Pattern: "canvas:*", Tick: 16 * time.Millisecond},
		{Pattern: "typing:lobby", Tick: 100 * time.Millisecond},
		{Pattern: "*", Tick: 0}, // ignored: no tick
	}}}
	tests := map[string]time.Duration{
		"canvas:board-1": 16 * time.Millisecond,
		"typing:lobby":   100 * time.Millisecond,
		"typing:other":   33 * time.Millisecond,
		"lobby":          33 * time.Millisecond,
	}
	for room, want := range tests {
		t.Run(room, func(t *testing.T) {
			if got := c.signalTick(room); got != want {
				t.Fatalf("tick %v, want %v", got, want)
			}
		})
	}
}
