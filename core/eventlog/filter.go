package eventlog

import (
	"errors"
	"fmt"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/roompattern"
)

// Bounds of an Events filter that have no setting: as many room patterns,
// and as long, as a user's grants.
const (
	maxPatterns   = grants.MaxPatterns
	maxPatternLen = grants.MaxPatternLen
)

// Filter selects the events an Events stream sends.
type Filter struct {
	rooms []string
	kinds uint32 // bit per EventKind; 0: every kind
}

// NewFilter returns the filter of req's rooms and kinds, or an error that
// says what is wrong with them (the messages are the caller's to show:
// they begin "core:" as the internal API's errors do).
func NewFilter(req *corralv1.EventsRequest) (*Filter, error) {
	f := &Filter{rooms: req.GetRooms()}
	if len(f.rooms) > maxPatterns {
		return nil, fmt.Errorf("core: more than %d room patterns", maxPatterns)
	}
	for _, p := range f.rooms {
		if p == "" {
			return nil, errors.New("core: empty room pattern")
		}
		if len(p) > maxPatternLen {
			return nil, fmt.Errorf("core: room pattern longer than %d bytes", maxPatternLen)
		}
	}
	for _, k := range req.GetKinds() {
		if k <= corralv1.EventKind_EVENT_KIND_UNSPECIFIED || k > corralv1.EventKind_EVENT_KIND_PRESENCE {
			return nil, fmt.Errorf("core: unknown event kind %d", k)
		}
		f.kinds |= 1 << uint32(k)
	}
	return f, nil
}

// Keep returns the events that pass the filter; it may return evs itself.
func (f *Filter) Keep(evs []*corralv1.Event) []*corralv1.Event {
	if len(f.rooms) == 0 && f.kinds == 0 {
		return evs
	}
	var out []*corralv1.Event
	for _, ev := range evs {
		if f.kinds != 0 && f.kinds&(1<<uint32(kindOf(ev))) == 0 {
			continue
		}
		if len(f.rooms) > 0 && !roompattern.Match(f.rooms, ev.GetRoom()) {
			continue
		}
		out = append(out, ev)
	}
	return out
}

func kindOf(ev *corralv1.Event) corralv1.EventKind {
	switch ev.GetKind().(type) {
	case *corralv1.Event_Message:
		return corralv1.EventKind_EVENT_KIND_MESSAGE
	case *corralv1.Event_Joined:
		return corralv1.EventKind_EVENT_KIND_JOINED
	case *corralv1.Event_Left:
		return corralv1.EventKind_EVENT_KIND_LEFT
	case *corralv1.Event_Disconnected:
		return corralv1.EventKind_EVENT_KIND_DISCONNECTED
	case *corralv1.Event_Presence:
		return corralv1.EventKind_EVENT_KIND_PRESENCE
	}
	return corralv1.EventKind_EVENT_KIND_UNSPECIFIED
}
