package bench

import (
	"fmt"
	"sync"
	"sync/atomic"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// PresenceStats is what presence cost each member, when the members joined
// with presence (--presence): the Presence frames they read and their
// encoded bytes in the run's encoding (as sent, one frame per WebSocket
// message or inside a batch).
type PresenceStats struct {
	Members int `json:"members"`
	// Frames and Bytes are totals over the members.
	Frames uint64 `json:"frames"`
	Bytes  uint64 `json:"bytes"`
	// Per member: mean and max.
	FramesPerMember    float64 `json:"framesPerMember"`
	BytesPerMember     float64 `json:"bytesPerMember"`
	MaxFramesPerMember uint64  `json:"maxFramesPerMember"`
	MaxBytesPerMember  uint64  `json:"maxBytesPerMember"`
}

// presenceCount counts one member's Presence frames; its consumer writes,
// the run reads (perhaps before a slow consumer ended).
type presenceCount struct {
	frames, bytes atomic.Uint64
	buf           []byte // the consumer's
}

// observe counts f if it is a Presence frame.
func (pc *presenceCount) observe(enc protocol.Encoding, f *corralv1.ServerFrame) {
	if f.GetPresence() == nil {
		return
	}
	pc.frames.Add(1)
	b, err := protocol.AppendServer(enc, pc.buf[:0], f)
	if err == nil {
		pc.bytes.Add(uint64(len(b)))
		pc.buf = b
	}
}

// presenceTally sums the members' counts.
type presenceTally struct {
	mu     sync.Mutex // guards counts
	counts []*presenceCount
}

// add counts pc's member.
func (t *presenceTally) add(pc *presenceCount) {
	t.mu.Lock()
	t.counts = append(t.counts, pc)
	t.mu.Unlock()
}

// stats sums the counts.
func (t *presenceTally) stats() *PresenceStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &PresenceStats{Members: len(t.counts)}
	for _, pc := range t.counts {
		n, b := pc.frames.Load(), pc.bytes.Load()
		s.Frames += n
		s.Bytes += b
		s.MaxFramesPerMember = max(s.MaxFramesPerMember, n)
		s.MaxBytesPerMember = max(s.MaxBytesPerMember, b)
	}
	if s.Members > 0 {
		s.FramesPerMember = float64(s.Frames) / float64(s.Members)
		s.BytesPerMember = float64(s.Bytes) / float64(s.Members)
	}
	return s
}

func (s *PresenceStats) headline() string {
	return fmt.Sprintf("; presence: %.1f frames (max %d) and %.0f bytes (max %d) per member",
		s.FramesPerMember, s.MaxFramesPerMember, s.BytesPerMember, s.MaxBytesPerMember)
}
