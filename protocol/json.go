package protocol

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The corral.v1.json subprotocol; doc.go describes the format. This file
// encodes; jsondecode.go decodes.
//
// The encoder is hand-written and appends: it runs once per room message
// and encoding on the server, without reflection or encoding/json.

func appendClientJSON(b []byte, f *corralv1.ClientFrame) []byte {
	switch k := f.Kind.(type) {
	case *corralv1.ClientFrame_Hello:
		b = append(b, `{"hello":`...)
		b = appendHello(b, k.Hello)
	case *corralv1.ClientFrame_Join:
		m := k.Join
		b = append(b, `{"join":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendUintField(b, s, `"sinceSeq":`, m.GetSinceSeq())
		b = appendStringField(b, s, `"epoch":`, m.GetEpoch())
		b = appendBoolField(b, s, `"presence":`, m.GetPresence())
		b = appendBytesField(b, s, "presenceState", m.GetPresenceState())
		b = appendBoolField(b, s, `"fromPosition":`, m.GetFromPosition())
		b = append(b, '}')
	case *corralv1.ClientFrame_Leave:
		b = append(b, `{"leave":{`...)
		b = appendStringField(b, len(b), `"room":`, k.Leave.GetRoom())
		b = append(b, '}')
	case *corralv1.ClientFrame_Publish:
		m := k.Publish
		b = append(b, `{"publish":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendStringField(b, s, `"id":`, m.GetId())
		b = appendPayloadField(b, s, m.GetPayload())
		b = append(b, '}')
	case *corralv1.ClientFrame_Signal:
		m := k.Signal
		b = append(b, `{"signal":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendStringField(b, s, `"key":`, m.GetKey())
		b = appendPayloadField(b, s, m.GetPayload())
		b = appendBoolField(b, s, `"clear":`, m.GetClear())
		b = append(b, '}')
	case *corralv1.ClientFrame_Ack:
		m := k.Ack
		b = append(b, `{"ack":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendUintField(b, s, `"seq":`, m.GetSeq())
		b = append(b, '}')
	case *corralv1.ClientFrame_Ping:
		b = append(b, `{"ping":{`...)
		b = appendUintField(b, len(b), `"id":`, k.Ping.GetId())
		b = append(b, '}')
	case *corralv1.ClientFrame_SetPresence:
		b = appendSetPresence(b, k.SetPresence)
		b = append(b, '}')
	case *corralv1.ClientFrame_PresenceQuery:
		b = appendPresenceQuery(b, k.PresenceQuery)
		b = append(b, '}')
	case *corralv1.ClientFrame_Refresh:
		b = append(b, `{"refresh":{`...)
		b = appendStringField(b, len(b), `"token":`, k.Refresh.GetToken())
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendHello(b []byte, m *corralv1.Hello) []byte {
	b = append(b, '{')
	s := len(b)
	b = appendStringField(b, s, `"token":`, m.GetToken())
	b = appendStringField(b, s, `"client":`, m.GetClient())
	if r := m.GetResume(); r != nil {
		b = comma(b, s)
		b = append(b, `"resume":{`...)
		rs := len(b)
		b = appendStringField(b, rs, `"sessionId":`, r.GetSessionId())
		b = appendStringField(b, rs, `"resumeToken":`, r.GetResumeToken())
		b = appendStringField(b, rs, `"instance":`, r.GetInstance())
		b = appendUintField(b, rs, `"attempt":`, uint64(r.GetAttempt()))
		if len(r.GetRooms()) > 0 {
			b = comma(b, rs)
			b = append(b, `"rooms":[`...)
			for i, p := range r.GetRooms() {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '{')
				ps := len(b)
				b = appendStringField(b, ps, `"room":`, p.GetRoom())
				b = appendUintField(b, ps, `"seq":`, p.GetSeq())
				b = appendStringField(b, ps, `"epoch":`, p.GetEpoch())
				b = appendBoolField(b, ps, `"presence":`, p.GetPresence())
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendServerJSON writes f, which must have a kind set unless it is inside
// a batch; a frame with no kind (or nil) in a batch is written as {}.
func appendServerJSON(b []byte, f *corralv1.ServerFrame) []byte {
	switch k := f.GetKind().(type) {
	case *corralv1.ServerFrame_Welcome:
		m := k.Welcome
		b = append(b, `{"welcome":{`...)
		s := len(b)
		b = appendStringField(b, s, `"sessionId":`, m.GetSessionId())
		b = appendStringField(b, s, `"resumeToken":`, m.GetResumeToken())
		b = appendStringField(b, s, `"userId":`, m.GetUserId())
		b = appendBoolField(b, s, `"resumed":`, m.GetResumed())
		b = appendUintField(b, s, `"heartbeatMs":`, uint64(m.GetHeartbeatMs()))
		b = appendUintField(b, s, `"sessionTtlMs":`, uint64(m.GetSessionTtlMs()))
		b = appendIntField(b, s, `"expiresUnix":`, m.GetExpiresUnix())
	case *corralv1.ServerFrame_Joined:
		m := k.Joined
		b = append(b, `{"joined":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendUintField(b, s, `"seq":`, m.GetSeq())
		b = appendStringField(b, s, `"epoch":`, m.GetEpoch())
		b = appendBoolField(b, s, `"resumed":`, m.GetResumed())
		b = appendBoolField(b, s, `"replay":`, m.GetReplay())
	case *corralv1.ServerFrame_ReplayEnd:
		m := k.ReplayEnd
		b = append(b, `{"replayEnd":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendUintField(b, s, `"seq":`, m.GetSeq())
	case *corralv1.ServerFrame_Left:
		m := k.Left
		b = append(b, `{"left":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendIntField(b, s, `"code":`, int64(m.GetCode()))
		b = appendStringField(b, s, `"reason":`, m.GetReason())
	case *corralv1.ServerFrame_Message:
		m := k.Message
		b = append(b, `{"message":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendUintField(b, s, `"seq":`, m.GetSeq())
		b = appendStringField(b, s, `"sender":`, m.GetSender())
		b = appendPayloadField(b, s, m.GetPayload())
		b = appendIntField(b, s, `"timeMs":`, m.GetTimeMs())
		b = appendStringField(b, s, `"id":`, m.GetId())
	case *corralv1.ServerFrame_Signal:
		m := k.Signal
		b = append(b, `{"signal":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendStringField(b, s, `"key":`, m.GetKey())
		b = appendStringField(b, s, `"sender":`, m.GetSender())
		b = appendPayloadField(b, s, m.GetPayload())
		b = appendBoolField(b, s, `"clear":`, m.GetClear())
	case *corralv1.ServerFrame_Published:
		m := k.Published
		b = append(b, `{"published":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendStringField(b, s, `"id":`, m.GetId())
		b = appendUintField(b, s, `"seq":`, m.GetSeq())
		b = appendBoolField(b, s, `"duplicate":`, m.GetDuplicate())
	case *corralv1.ServerFrame_Pong:
		m := k.Pong
		b = append(b, `{"pong":{`...)
		s := len(b)
		b = appendUintField(b, s, `"id":`, m.GetId())
		b = appendIntField(b, s, `"timeMs":`, m.GetTimeMs())
	case *corralv1.ServerFrame_Reconnect:
		m := k.Reconnect
		b = append(b, `{"reconnect":{`...)
		s := len(b)
		b = appendIntField(b, s, `"code":`, int64(m.GetCode()))
		b = appendStringField(b, s, `"reason":`, m.GetReason())
		b = appendUintField(b, s, `"delayMs":`, uint64(m.GetDelayMs()))
	case *corralv1.ServerFrame_Error:
		m := k.Error
		b = append(b, `{"error":{`...)
		s := len(b)
		b = appendIntField(b, s, `"code":`, int64(m.GetCode()))
		b = appendStringField(b, s, `"message":`, m.GetMessage())
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendStringField(b, s, `"ref":`, m.GetRef())
		b = appendUintField(b, s, `"retryAfterMs":`, uint64(m.GetRetryAfterMs()))
	case *corralv1.ServerFrame_Reset_:
		m := k.Reset_
		b = append(b, `{"reset":{`...)
		s := len(b)
		b = appendStringField(b, s, `"room":`, m.GetRoom())
		b = appendUintField(b, s, `"seq":`, m.GetSeq())
		b = appendStringField(b, s, `"epoch":`, m.GetEpoch())
	case *corralv1.ServerFrame_Presence:
		b = appendPresence(b, k.Presence)
	case *corralv1.ServerFrame_PresencePage:
		b = appendPresencePage(b, k.PresencePage)
	case *corralv1.ServerFrame_Refreshed:
		b = append(b, `{"refreshed":{`...)
		b = appendIntField(b, len(b), `"expiresUnix":`, k.Refreshed.GetExpiresUnix())
	case *corralv1.ServerFrame_Batch:
		b = append(b, `{"batch":{`...)
		if frames := k.Batch.GetFrames(); len(frames) > 0 {
			b = append(b, `"frames":[`...)
			for i, f := range frames {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendServerJSON(b, f)
			}
			b = append(b, ']')
		}
	default:
		return append(b, "{}"...)
	}
	return append(b, "}}"...)
}

// comma appends the separator before a member of the object whose first
// member would start at start.
func comma(b []byte, start int) []byte {
	if len(b) > start {
		return append(b, ',')
	}
	return b
}

// The append*Field helpers write `key` and a value unless the value is
// zero. key includes its quotes and colon, e.g. `"room":`.

func appendStringField(b []byte, start int, key, v string) []byte {
	if v == "" {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return appendString(b, v)
}

func appendUintField(b []byte, start int, key string, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return strconv.AppendUint(b, v, 10)
}

func appendIntField(b []byte, start int, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return strconv.AppendInt(b, v, 10)
}

func appendBoolField(b []byte, start int, key string, v bool) []byte {
	if !v {
		return b
	}
	b = comma(b, start)
	b = append(b, key...)
	return append(b, "true"...)
}

// appendPayloadField writes p inline when it is JSON that decodes back to
// the same bytes, and as payloadBase64 otherwise.
func appendPayloadField(b []byte, start int, p []byte) []byte {
	return appendBytesField(b, start, "payload", p)
}

// appendBytesField writes the bytes field key as appendPayloadField writes
// "payload": inline under key, or base64 under key+"Base64". Presence
// states ("state", "presenceState") are written this way too.
func appendBytesField(b []byte, start int, key string, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	b = comma(b, start)
	b = append(b, '"')
	b = append(b, key...)
	if inlinePayload(p) {
		b = append(b, `":`...)
		return append(b, p...)
	}
	b = append(b, `Base64":"`...)
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}

// inlinePayload reports whether p can be written as an inline JSON value
// that a decoder reads back byte for byte: valid JSON, valid UTF-8 (text
// messages must be), no white space around it (the decoder keeps only the
// value), and not null (which decodes as no payload).
func inlinePayload(p []byte) bool {
	return !isSpace(p[0]) && !isSpace(p[len(p)-1]) &&
		string(p) != "null" && validJSON(p)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

const hexDigits = "0123456789abcdef"

// safeASCII[c] is true for ASCII bytes written as they are in a JSON
// string.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString writes s as a JSON string. Control characters are escaped,
// invalid UTF-8 becomes \ufffd, and U+2028 and U+2029 are escaped so the
// output is also valid JavaScript.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
