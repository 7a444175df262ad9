package client

// outbox is one room's unresolved publishes of a Session, in the order
// they were made, each with its place in the session's sequence for the
// room (corralv1.Publish.seq). It is what keeps a sender's publishes in
// order across refusals, retries and reconnects: a publish is sent at
// once, but sent again only from the head of the outbox, and the server
// refuses (CODE_OUT_OF_ORDER) one whose predecessor it has not stored, so
// a later publish never enters the room before an earlier one
// (docs/GUARANTEES.md). Session.mu guards every field.
//
// Until one of its publishes is stored, an outbox sends only its head: its
// places start at 1, which the server takes as the sequence starting
// again (this Session is a new instance of the session for the room), so
// a second publish must not reach the server before the first is stored.
// A Session keeps a room's outbox, and its count, until Leave.
type outbox struct {
	next    uint64        // the places given so far
	started bool          // one of its publishes was stored
	pending []*outgoing   // unresolved, in order of place
	moved   chan struct{} // closed (and replaced) when pending loses one
}

// outgoing is one unresolved publish.
type outgoing struct {
	id  string
	seq uint64
}

func newOutbox() *outbox { return &outbox{moved: make(chan struct{})} }

// add gives id the next place. Session.mu must be held.
func (o *outbox) add(id string) *outgoing {
	o.next++
	p := &outgoing{id: id, seq: o.next}
	o.pending = append(o.pending, p)
	return p
}

// atHead reports whether every publish before p is resolved. Session.mu
// must be held.
func (o *outbox) atHead(p *outgoing) bool {
	return len(o.pending) > 0 && o.pending[0] == p
}

// remove drops p. stored says the server stored p; when it did not (a
// refusal that stops, or the caller gave up), the places after it move
// down by one, so that its successors do not wait for a place nobody
// fills. If p was stored after all (its answer lost), its successor's
// place is then at or below the server's mark under a new id, which the
// server takes as the sequence starting again: the order still holds.
// Session.mu must be held.
func (o *outbox) remove(p *outgoing, stored bool) {
	i := 0
	for i < len(o.pending) && o.pending[i] != p {
		i++
	}
	if i == len(o.pending) {
		return
	}
	o.pending = append(o.pending[:i], o.pending[i+1:]...)
	o.started = o.started || stored
	if !stored {
		for _, q := range o.pending[i:] {
			q.seq--
		}
		o.next--
	}
	close(o.moved)
	o.moved = make(chan struct{})
}
