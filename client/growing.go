package client

import (
	"errors"
	"fmt"

	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// ErrChunkGap is returned by Assembler.Feed for a chunk that cannot be
// applied to what the member holds: a non-replace chunk (or a delta) more
// than one version ahead, or a chunk of a message it never saw open.
// Nothing changes; rejoin the room from a position before the message to
// get it again as a prefix (docs/MESSAGES.md).
var ErrChunkGap = errors.New("client: growing message: missing chunk")

// Growing is a growing message as a member assembled it so far
// (docs/MESSAGES.md): the body of every chunk up to Version, in order.
type Growing struct {
	Room string
	ID   string
	// MessageSeq is the seq of the message's first chunk; Seq the seq of
	// the last chunk applied.
	MessageSeq uint64
	Seq        uint64
	Version    uint64
	Body       []byte
	Final      bool
}

// Assembler rebuilds growing messages from the chunk messages a member
// receives (Message.chunk set), exactly once and in order: a chunk whose
// version (or seq) the message already has is a duplicate, ignored (a
// resume replays chunks); a replace chunk, such as the prefix a joiner
// gets, sets the whole body at its version; an append chunk must be the
// next version (else ErrChunkGap). Finished messages are kept, so that a
// late duplicate is still ignored, until Forget.
//
// An Assembler is not safe for concurrent use: feed it from the goroutine
// that reads the frames.
type Assembler struct {
	msgs map[growKey]*Growing
	// MaxBytes bounds a message's body (0: 1 MiB, the server's default
	// bound); a larger one is an error.
	MaxBytes int
}

type growKey struct{ room, id string }

// NewAssembler returns an empty Assembler.
func NewAssembler() *Assembler { return &Assembler{msgs: make(map[growKey]*Growing)} }

// Feed applies m's chunk. It returns the message as assembled and whether
// this chunk changed it (false: a duplicate, ignored); m without a chunk
// returns nil, false, nil. The returned Growing is the Assembler's: read
// it before the next Feed, or copy it.
func (a *Assembler) Feed(m *corralv1.Message) (*Growing, bool, error) {
	c := m.GetChunk()
	if c == nil {
		return nil, false, nil
	}
	k := growKey{m.GetRoom(), m.GetId()}
	g := a.msgs[k]
	if g != nil && g.MessageSeq != c.GetMessageSeq() && c.GetMessageSeq() > g.MessageSeq {
		g = nil // a new message under a reused id (a later epoch)
	}
	if g != nil && (c.GetVersion() <= g.Version || m.GetSeq() <= g.Seq) {
		return g, false, nil // a duplicate: a replay, or older than the prefix
	}
	if g != nil && g.Final {
		return g, false, fmt.Errorf("%w: version %d of %q after its final chunk", ErrChunkGap, c.GetVersion(), m.GetId())
	}
	held := uint64(0)
	if g != nil {
		held = g.Version
	}
	if !c.GetReplace() && c.GetVersion() != held+1 {
		return g, false, fmt.Errorf("%w: version %d of %q after version %d", ErrChunkGap, c.GetVersion(), m.GetId(), held)
	}
	data := c.GetData()
	if len(c.GetDelta()) > 0 {
		if g == nil || c.GetVersion() != held+1 {
			return g, false, fmt.Errorf("%w: a delta to version %d of %q, holding version %d", ErrChunkGap, c.GetVersion(), m.GetId(), held)
		}
		var err error
		if data, err = delta.Apply(g.Body, c.GetDelta(), a.max()); err != nil {
			return g, false, fmt.Errorf("client: growing message %q version %d: %w", m.GetId(), c.GetVersion(), err)
		}
	}
	var body []byte
	if c.GetReplace() {
		body = append([]byte(nil), data...)
	} else {
		body = append(g.bodyOrNil(), data...)
	}
	if len(body) > a.max() {
		return g, false, fmt.Errorf("client: growing message %q: body of %d bytes past %d", m.GetId(), len(body), a.max())
	}
	if g == nil {
		g = &Growing{Room: m.GetRoom(), ID: m.GetId(), MessageSeq: c.GetMessageSeq()}
		if a.msgs == nil {
			a.msgs = make(map[growKey]*Growing)
		}
		a.msgs[k] = g
	}
	g.Seq, g.Version, g.Body, g.Final = m.GetSeq(), c.GetVersion(), body, c.GetFinal()
	return g, true, nil
}

// Get returns the message id of room as assembled so far, or nil.
func (a *Assembler) Get(room, id string) *Growing { return a.msgs[growKey{room, id}] }

// Forget drops the message id of room (after its final chunk, when no
// replay can bring it back).
func (a *Assembler) Forget(room, id string) { delete(a.msgs, growKey{room, id}) }

func (a *Assembler) max() int {
	if a.MaxBytes > 0 {
		return a.MaxBytes
	}
	return 1 << 20
}

func (g *Growing) bodyOrNil() []byte {
	if g == nil {
		return nil
	}
	return g.Body
}
