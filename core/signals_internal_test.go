package core

import (
	"testing"
	"time"

	"github.com/corral-rt/corral/roomclass"
)

func TestSignalTick(t *testing.T) {
	def := roomclass.Default()
	def.SignalTick = 33 * time.Millisecond
	class := func(name, pattern string, tick time.Duration) roomclass.Class {
		c := def
		c.Name, c.Match, c.SignalTick = name, roomclass.Patterns{pattern}, tick
		return c
	}
	classes := []roomclass.Class{
		class("canvas", "canvas:*", 16*time.Millisecond),
		class("typing", "typing:lobby", 100*time.Millisecond),
	}
	c := &Core{cfg: Config{Classes: roomclass.NewLive(roomclass.NewTable(def, classes))}}
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
