package protocol

import (
	"strconv"
	"unicode/utf8"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Decoding of the corral.v1.json subprotocol. A message is first checked
// whole by validJSON (jsonvalid.go); then the decoder (jsonscan.go) walks
// it relying on valid syntax, and these functions map members to fields.

func decodeClientJSON(data []byte, dst *corralv1.ClientFrame) error {
	dst.Reset()
	if err := checkJSON(data); err != nil {
		return err
	}
	d := decoder{b: data}
	if d.peek() != '{' {
		return d.typeErr("frame", "object")
	}
	d.i++
	for {
		key, ok := d.nextKey()
		if !ok {
			break
		}
		var err error
		switch string(key) {
		case "hello":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Hello)
				dst.Kind = &corralv1.ClientFrame_Hello{Hello: m}
				err = d.hello(m)
			}
		case "join":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Join)
				dst.Kind = &corralv1.ClientFrame_Join{Join: m}
				err = d.join(m)
			}
		case "leave":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Leave)
				dst.Kind = &corralv1.ClientFrame_Leave{Leave: m}
				err = d.leave(m)
			}
		case "publish":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				// One allocation for the hot kind and its wrapper.
				box := new(struct {
					w corralv1.ClientFrame_Publish
					m corralv1.Publish
				})
				box.w.Publish = &box.m
				dst.Kind = &box.w
				err = d.publish(&box.m)
			}
		case "signal":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Signal)
				dst.Kind = &corralv1.ClientFrame_Signal{Signal: m}
				err = d.signal(m)
			}
		case "ack":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Ack)
				dst.Kind = &corralv1.ClientFrame_Ack{Ack: m}
				err = d.ack(m)
			}
		case "ping":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Ping)
				dst.Kind = &corralv1.ClientFrame_Ping{Ping: m}
				err = d.ping(m)
			}
		case "setPresence", "set_presence":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.SetPresence)
				dst.Kind = &corralv1.ClientFrame_SetPresence{SetPresence: m}
				err = d.setPresence(m)
			}
		case "presenceQuery", "presence_query":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.PresenceQuery)
				dst.Kind = &corralv1.ClientFrame_PresenceQuery{PresenceQuery: m}
				err = d.presenceQuery(m)
			}
		case "refresh":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Refresh)
				dst.Kind = &corralv1.ClientFrame_Refresh{Refresh: m}
				err = d.refresh(m)
			}
		default:
			d.skip()
		}
		if err != nil {
			dst.Reset()
			return err
		}
	}
	if dst.Kind == nil {
		return unknownFrame("no known kind in JSON object")
	}
	return nil
}

func decodeServerJSON(data []byte, dst *corralv1.ServerFrame) error {
	dst.Reset()
	if err := checkJSON(data); err != nil {
		return err
	}
	d := decoder{b: data}
	if d.peek() != '{' {
		return d.typeErr("frame", "object")
	}
	d.i++
	if err := d.serverFrame(dst); err != nil {
		dst.Reset()
		return err
	}
	if dst.Kind == nil {
		return unknownFrame("no known kind in JSON object")
	}
	return nil
}

func checkJSON(data []byte) error {
	if !validJSON(data) {
		if !utf8.Valid(data) {
			return badFrame("", "invalid UTF-8")
		}
		return badFrame("", "invalid JSON")
	}
	return nil
}

// serverFrame reads the members of a ServerFrame object whose { has been
// read. It leaves dst.Kind nil when no member names a known kind.
func (d *decoder) serverFrame(dst *corralv1.ServerFrame) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "welcome":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Welcome)
				dst.Kind = &corralv1.ServerFrame_Welcome{Welcome: m}
				err = d.welcome(m)
			}
		case "joined":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Joined)
				dst.Kind = &corralv1.ServerFrame_Joined{Joined: m}
				err = d.joined(m)
			}
		case "left":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Left)
				dst.Kind = &corralv1.ServerFrame_Left{Left: m}
				err = d.left(m)
			}
		case "message":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				// One allocation for the hot kind and its wrapper.
				box := new(struct {
					w corralv1.ServerFrame_Message
					m corralv1.Message
				})
				box.w.Message = &box.m
				dst.Kind = &box.w
				err = d.message(&box.m)
			}
		case "signal":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.SignalEvent)
				dst.Kind = &corralv1.ServerFrame_Signal{Signal: m}
				err = d.signalEvent(m)
			}
		case "published":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Published)
				dst.Kind = &corralv1.ServerFrame_Published{Published: m}
				err = d.published(m)
			}
		case "pong":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Pong)
				dst.Kind = &corralv1.ServerFrame_Pong{Pong: m}
				err = d.pong(m)
			}
		case "reconnect":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.ReconnectHint)
				dst.Kind = &corralv1.ServerFrame_Reconnect{Reconnect: m}
				err = d.reconnect(m)
			}
		case "error":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Error)
				dst.Kind = &corralv1.ServerFrame_Error{Error: m}
				err = d.errorFrame(m)
			}
		case "reset":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Reset)
				dst.Kind = &corralv1.ServerFrame_Reset_{Reset_: m}
				err = d.reset(m)
			}
		case "replayEnd", "replay_end":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.ReplayEnd)
				dst.Kind = &corralv1.ServerFrame_ReplayEnd{ReplayEnd: m}
				err = d.replayEnd(m)
			}
		case "presence":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Presence)
				dst.Kind = &corralv1.ServerFrame_Presence{Presence: m}
				err = d.presence(m)
			}
		case "presencePage", "presence_page":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.PresencePage)
				dst.Kind = &corralv1.ServerFrame_PresencePage{PresencePage: m}
				err = d.presencePage(m)
			}
		case "refreshed":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Refreshed)
				dst.Kind = &corralv1.ServerFrame_Refreshed{Refreshed: m}
				err = d.refreshed(m)
			}
		case "batch":
			if ok, err = d.openKind(key, dst.Kind != nil); ok {
				m := new(corralv1.Batch)
				dst.Kind = &corralv1.ServerFrame_Batch{Batch: m}
				err = d.batch(m)
			}
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

// openKind starts reading the value of a kind member. It returns false for
// null (a kind not set) and an error when another kind was set already or
// the value is not an object.
func (d *decoder) openKind(key []byte, haveKind bool) (bool, error) {
	switch d.peek() {
	case 'n':
		d.skip()
		return false, nil
	case '{':
		if haveKind {
			return false, badFrame(string(key), "more than one kind in JSON object")
		}
		d.i++
		return true, nil
	}
	return false, d.typeErr(string(key), "object")
}

// openObject starts reading an object value; it returns false for null.
func (d *decoder) openObject(path string) (bool, error) {
	switch d.peek() {
	case 'n':
		d.skip()
		return false, nil
	case '{':
		d.i++
		return true, nil
	}
	return false, d.typeErr(path, "object")
}

// openArray is openObject for an array: false (and no error) for null.
func (d *decoder) openArray(path string) (bool, error) {
	switch d.peek() {
	case 'n':
		d.skip()
		return false, nil
	case '[':
		d.i++
		return true, nil
	}
	return false, d.typeErr(path, "array")
}

func (d *decoder) hello(m *corralv1.Hello) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "token":
			m.Token, err = d.str("hello.token")
		case "client":
			m.Client, err = d.str("hello.client")
		case "resume":
			if ok, err = d.openObject("hello.resume"); ok {
				m.Resume = new(corralv1.Resume)
				err = d.resume(m.Resume)
			}
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) resume(m *corralv1.Resume) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "sessionId", "session_id":
			m.SessionId, err = d.str("hello.resume.sessionId")
		case "resumeToken", "resume_token":
			m.ResumeToken, err = d.str("hello.resume.resumeToken")
		case "instance":
			m.Instance, err = d.str("hello.resume.instance")
		case "attempt":
			var u uint64
			u, err = d.uint("hello.resume.attempt", 32)
			m.Attempt = uint32(u)
		case "rooms":
			err = d.rooms(m)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) rooms(m *corralv1.Resume) error {
	const path = "hello.resume.rooms"
	if ok, err := d.openArray(path); !ok {
		return err
	}
	for d.nextElem() {
		if d.peek() != '{' {
			return d.typeErr(path+"[]", "object")
		}
		d.i++
		p := new(corralv1.RoomPosition)
		m.Rooms = append(m.Rooms, p)
		for {
			key, ok := d.nextKey()
			if !ok {
				break
			}
			var err error
			switch string(key) {
			case "room":
				p.Room, err = d.str(path + "[].room")
			case "seq":
				p.Seq, err = d.uint(path+"[].seq", 64)
			case "epoch":
				p.Epoch, err = d.str(path + "[].epoch")
			case "presence":
				p.Presence, err = d.bool(path + "[].presence")
			default:
				d.skip()
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *decoder) join(m *corralv1.Join) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("join.room")
		case "sinceSeq", "since_seq":
			m.SinceSeq, err = d.uint("join.sinceSeq", 64)
		case "epoch":
			m.Epoch, err = d.str("join.epoch")
		case "presence":
			m.Presence, err = d.bool("join.presence")
		case "presenceState", "presence_state":
			m.PresenceState, err = d.payload("join.presenceState", m.PresenceState)
		case "presenceStateBase64", "presence_state_base64":
			m.PresenceState, err = d.payloadBase64("join.presenceStateBase64", m.PresenceState)
		case "fromPosition", "from_position":
			m.FromPosition, err = d.bool("join.fromPosition")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) leave(m *corralv1.Leave) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("leave.room")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) publish(m *corralv1.Publish) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("publish.room")
		case "id":
			m.Id, err = d.str("publish.id")
		case "payload":
			m.Payload, err = d.payload("publish.payload", m.Payload)
		case "payloadBase64", "payload_base64":
			m.Payload, err = d.payloadBase64("publish.payloadBase64", m.Payload)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) signal(m *corralv1.Signal) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("signal.room")
		case "key":
			m.Key, err = d.str("signal.key")
		case "payload":
			m.Payload, err = d.payload("signal.payload", m.Payload)
		case "payloadBase64", "payload_base64":
			m.Payload, err = d.payloadBase64("signal.payloadBase64", m.Payload)
		case "clear":
			m.Clear, err = d.bool("signal.clear")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) ack(m *corralv1.Ack) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("ack.room")
		case "seq":
			m.Seq, err = d.uint("ack.seq", 64)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) ping(m *corralv1.Ping) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "id":
			m.Id, err = d.uint("ping.id", 64)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) refresh(m *corralv1.Refresh) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "token":
			m.Token, err = d.str("refresh.token")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) refreshed(m *corralv1.Refreshed) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "expiresUnix", "expires_unix":
			m.ExpiresUnix, err = d.int("refreshed.expiresUnix", 64)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) welcome(m *corralv1.Welcome) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		var u uint64
		switch string(key) {
		case "sessionId", "session_id":
			m.SessionId, err = d.str("welcome.sessionId")
		case "resumeToken", "resume_token":
			m.ResumeToken, err = d.str("welcome.resumeToken")
		case "userId", "user_id":
			m.UserId, err = d.str("welcome.userId")
		case "resumed":
			m.Resumed, err = d.bool("welcome.resumed")
		case "heartbeatMs", "heartbeat_ms":
			u, err = d.uint("welcome.heartbeatMs", 32)
			m.HeartbeatMs = uint32(u)
		case "sessionTtlMs", "session_ttl_ms":
			u, err = d.uint("welcome.sessionTtlMs", 32)
			m.SessionTtlMs = uint32(u)
		case "expiresUnix", "expires_unix":
			m.ExpiresUnix, err = d.int("welcome.expiresUnix", 64)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) joined(m *corralv1.Joined) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("joined.room")
		case "seq":
			m.Seq, err = d.uint("joined.seq", 64)
		case "epoch":
			m.Epoch, err = d.str("joined.epoch")
		case "resumed":
			m.Resumed, err = d.bool("joined.resumed")
		case "replay":
			m.Replay, err = d.bool("joined.replay")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) left(m *corralv1.Left) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("left.room")
		case "code":
			m.Code, err = d.code("left.code")
		case "reason":
			m.Reason, err = d.str("left.reason")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) message(m *corralv1.Message) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("message.room")
		case "seq":
			m.Seq, err = d.uint("message.seq", 64)
		case "sender":
			m.Sender, err = d.str("message.sender")
		case "payload":
			m.Payload, err = d.payload("message.payload", m.Payload)
		case "payloadBase64", "payload_base64":
			m.Payload, err = d.payloadBase64("message.payloadBase64", m.Payload)
		case "timeMs", "time_ms":
			m.TimeMs, err = d.int("message.timeMs", 64)
		case "id":
			m.Id, err = d.str("message.id")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) signalEvent(m *corralv1.SignalEvent) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("signal.room")
		case "key":
			m.Key, err = d.str("signal.key")
		case "sender":
			m.Sender, err = d.str("signal.sender")
		case "payload":
			m.Payload, err = d.payload("signal.payload", m.Payload)
		case "payloadBase64", "payload_base64":
			m.Payload, err = d.payloadBase64("signal.payloadBase64", m.Payload)
		case "clear":
			m.Clear, err = d.bool("signal.clear")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) published(m *corralv1.Published) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("published.room")
		case "id":
			m.Id, err = d.str("published.id")
		case "seq":
			m.Seq, err = d.uint("published.seq", 64)
		case "duplicate":
			m.Duplicate, err = d.bool("published.duplicate")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) pong(m *corralv1.Pong) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "id":
			m.Id, err = d.uint("pong.id", 64)
		case "timeMs", "time_ms":
			m.TimeMs, err = d.int("pong.timeMs", 64)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) reconnect(m *corralv1.ReconnectHint) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		var u uint64
		switch string(key) {
		case "code":
			m.Code, err = d.code("reconnect.code")
		case "reason":
			m.Reason, err = d.str("reconnect.reason")
		case "delayMs", "delay_ms":
			u, err = d.uint("reconnect.delayMs", 32)
			m.DelayMs = uint32(u)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) errorFrame(m *corralv1.Error) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		var u uint64
		switch string(key) {
		case "code":
			m.Code, err = d.code("error.code")
		case "message":
			m.Message, err = d.str("error.message")
		case "room":
			m.Room, err = d.str("error.room")
		case "ref":
			m.Ref, err = d.str("error.ref")
		case "retryAfterMs", "retry_after_ms":
			u, err = d.uint("error.retryAfterMs", 32)
			m.RetryAfterMs = uint32(u)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) replayEnd(m *corralv1.ReplayEnd) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("replayEnd.room")
		case "seq":
			m.Seq, err = d.uint("replayEnd.seq", 64)
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) reset(m *corralv1.Reset) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		var err error
		switch string(key) {
		case "room":
			m.Room, err = d.str("reset.room")
		case "seq":
			m.Seq, err = d.uint("reset.seq", 64)
		case "epoch":
			m.Epoch, err = d.str("reset.epoch")
		default:
			d.skip()
		}
		if err != nil {
			return err
		}
	}
}

func (d *decoder) batch(m *corralv1.Batch) error {
	for {
		key, ok := d.nextKey()
		if !ok {
			return nil
		}
		if string(key) != "frames" {
			d.skip()
			continue
		}
		if ok, err := d.openArray("batch.frames"); !ok {
			if err != nil {
				return err
			}
			continue
		}
		for d.nextElem() {
			n := len(m.Frames)
			if d.peek() != '{' {
				return d.typeErr("batch.frames["+strconv.Itoa(n)+"]", "object")
			}
			d.i++
			// A frame of an unknown kind stays in the batch with no kind set.
			f := new(corralv1.ServerFrame)
			m.Frames = append(m.Frames, f)
			if err := d.serverFrame(f); err != nil {
				if fe, ok := err.(*frameError); ok {
					fe.path = "batch.frames[" + strconv.Itoa(n) + "]." + fe.path
				}
				return err
			}
		}
	}
}
