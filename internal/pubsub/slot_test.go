package pubsub_test

import (
	"testing"

	"github.com/corral-rt/corral/internal/pubsub"
)

// The expected slots are what CLUSTER KEYSLOT answers.
func TestSlot(t *testing.T) {
	tests := map[string]uint16{
		"123456789":     12739, // the CRC16/XMODEM check value, mod 16384
		"foo":           12182,
		"{user1000}.a":  3443,
		"{user1000}.b":  3443,
		"user1000":      3443,
		"foo{}{bar}":    8363,
		"foo{{bar}}zap": 4015,
		"foo{bar}{zap}": 5061,
		"corral:{r}:ch": 7893,
		"":              0,
	}
	for name, want := range tests {
		if got := pubsub.Slot(name); got != want {
			t.Errorf("Slot(%q) = %d, want %d", name, got, want)
		}
	}
}
