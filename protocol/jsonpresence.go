package protocol

import (
	"strconv"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The presence frames in the corral.v1.json subprotocol. A presence state
// is a bytes field written like a payload: an inline JSON value under
// "state", or "stateBase64" when it would not read back the same inline.

func appendPresenceMembers(b []byte, start int, key string, ms []*corralv1.PresenceMember) []byte {
	if len(ms) == 0 {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	b = append(b, '[')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		s := len(b)
		b = appendStringField(b, s, `"userId":`, m.GetUserId())
		b = appendBytesField(b, s, "state", m.GetState())
		b = appendUintField(b, s, `"connections":`, uint64(m.GetConnections()))
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendPresence(b []byte, m *corralv1.Presence) []byte {
	b = append(b, `{"presence":{`...)
	s := len(b)
	b = appendStringField(b, s, `"room":`, m.GetRoom())
	b = appendBoolField(b, s, `"snapshot":`, m.GetSnapshot())
	b = appendPresenceMembers(b, s, `"joins":`, m.GetJoins())
	b = appendPresenceMembers(b, s, `"updates":`, m.GetUpdates())
	if ls := m.GetLeaves(); len(ls) > 0 {
		b = comma(b, s)
		b = append(b, `"leaves":[`...)
		for i, u := range ls {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, u)
		}
		b = append(b, ']')
	}
	b = appendUintField(b, s, `"members":`, uint64(m.GetMembers()))
	b = appendUintField(b, s, `"connections":`, uint64(m.GetConnections()))
	b = appendBoolField(b, s, `"countsOnly":`, m.GetCountsOnly())
	return b
}

func appendPresencePage(b []byte, m *corralv1.PresencePage) []byte {
	b = append(b, `{"presencePage":{`...)
	s := len(b)
	b = appendStringField(b, s, `"room":`, m.GetRoom())
	b = appendPresenceMembers(b, s, `"members":`, m.GetMembers())
	b = appendStringField(b, s, `"next":`, m.GetNext())
	b = appendUintField(b, s, `"total":`, uint64(m.GetTotal()))
	return b
}

func appendSetPresence(b []byte, m *corralv1.SetPresence) []byte {
	b = append(b, `{"setPresence":{`...)
	s := len(b)
	b = appendStringField(b, s, `"room":`, m.GetRoom())
	return appendBytesField(b, s, "state", m.GetState())
}

func appendPresenceQuery(b []byte, m *corralv1.PresenceQuery) []byte {
	b = append(b, `{"presenceQuery":{`...)
	s := len(b)
	b = appendStringField(b, s, `"room":`, m.GetRoom())
	b = appendStringField(b, s, `"after":`, m.GetAfter())
	return appendUintField(b, s, `"limit":`, uint64(m.GetLimit()))
}

func (d *decoder) setPresence(m *corralv1.SetPresence) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("setPresence.room")
		case "state":
			m.State, err = d.payload("setPresence.state", m.State)
		case "stateBase64", "state_base64":
			m.State, err = d.payloadBase64("setPresence.stateBase64", m.State)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) presenceQuery(m *corralv1.PresenceQuery) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("presenceQuery.room")
		case "after":
			m.After, err = d.str("presenceQuery.after")
		case "limit":
			var v uint64
			v, err = d.uint("presenceQuery.limit", 32)
			m.Limit = uint32(v)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) presenceMembers(path string, dst []*corralv1.PresenceMember) ([]*corralv1.PresenceMember, error) {
	if ok, err := d.openArray(path); !ok {
		return dst, err
	}
	for d.nextElem() {
		p := path + "[" + strconv.Itoa(len(dst)) + "]"
		if d.peek() != '{' {
			return dst, d.typeErr(p, "object")
		}
		d.i++
		m := new(corralv1.PresenceMember)
		dst = append(dst, m)
		for {
			key, ok := d.nextKey()
			if !ok {
				break
			}
			var err error
			switch string(key) {
			case "userId", "user_id":
				m.UserId, err = d.str(p + ".userId")
			case "state":
				m.State, err = d.payload(p+".state", m.State)
			case "stateBase64", "state_base64":
				m.State, err = d.payloadBase64(p+".stateBase64", m.State)
			case "connections":
				var v uint64
				v, err = d.uint(p+".connections", 32)
				m.Connections = uint32(v)
			default:
				d.skip()
			}
			if err != nil {
				return dst, err
			}
		}
	}
	return dst, nil
}

func (d *decoder) presence(m *corralv1.Presence) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		var v uint64
		switch string(key) {
		case "room":
			m.Room, err = d.str("presence.room")
		case "snapshot":
			m.Snapshot, err = d.bool("presence.snapshot")
		case "joins":
			m.Joins, err = d.presenceMembers("presence.joins", m.Joins)
		case "updates":
			m.Updates, err = d.presenceMembers("presence.updates", m.Updates)
		case "leaves":
			var open bool
			if open, err = d.openArray("presence.leaves"); open {
				for d.nextElem() {
					var u string
					if u, err = d.str("presence.leaves[]"); err != nil {
						return err
					}
					m.Leaves = append(m.Leaves, u)
				}
			}
		case "members":
			v, err = d.uint("presence.members", 32)
			m.Members = uint32(v)
		case "connections":
			v, err = d.uint("presence.connections", 32)
			m.Connections = uint32(v)
		case "countsOnly", "counts_only":
			m.CountsOnly, err = d.bool("presence.countsOnly")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) presencePage(m *corralv1.PresencePage) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("presencePage.room")
		case "members":
			m.Members, err = d.presenceMembers("presencePage.members", m.Members)
		case "next":
			m.Next, err = d.str("presencePage.next")
		case "total":
			var v uint64
			v, err = d.uint("presencePage.total", 32)
			m.Total = uint32(v)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}
