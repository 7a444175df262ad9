package protocol_test

import (
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Sample frames of every kind, shared by the tests, fuzz seeds and
// benchmarks.

func clientFrames() map[string]*corralv1.ClientFrame {
	return map[string]*corralv1.ClientFrame{
		"join presence": {Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
			Room: "lobby", Presence: true, PresenceState: []byte(`{"name":"Ann","colour":"#f00"}`),
		}}},
		"join presence binary state": {Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
			Room: "lobby", Presence: true, PresenceState: []byte{0xff, 0x00},
		}}},
		"set presence": {Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{
			Room: "lobby", State: []byte(`"away"`),
		}}},
		"set presence empty": {Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{Room: "lobby"}}},
		"presence query": {Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{
			Room: "arena", After: "u0100", Limit: 50,
		}}},
		"hello resume presence": {Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
			Resume: &corralv1.Resume{SessionId: "s", ResumeToken: "t", Rooms: []*corralv1.RoomPosition{
				{Room: "lobby", Seq: 3, Epoch: "e", Presence: true},
			}},
		}}},
		"hello": {Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
			Token: "eyJhbGciOiJFZERTQSJ9.e30.sig", Client: "corral-js/1.0",
		}}},
		"hello resume": {Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
			Token: "t",
			Resume: &corralv1.Resume{
				SessionId: "s1", ResumeToken: "rt",
				Rooms: []*corralv1.RoomPosition{
					{Room: "a", Seq: 7, Epoch: "e1"},
					{Room: "b"},
				},
			},
		}}},
		"hello resume attempt": {Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
			Resume: &corralv1.Resume{SessionId: "s1", ResumeToken: "rt", Instance: "k3x9", Attempt: 4},
		}}},
		"hello empty resume": {Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
			Resume: &corralv1.Resume{},
		}}},
		"join": {Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
			Room: "a", SinceSeq: 1<<53 - 1, Epoch: "e1",
		}}},
		"join from start of epoch": {Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
			Room: "a", Epoch: "e1", FromPosition: true,
		}}},
		"leave": {Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "a"}}},
		"publish": {Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
			Room: "a", Id: "c1", Payload: []byte(`{"text":"hi"}`),
		}}},
		"publish binary": {Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
			Room: "a", Id: "c2", Payload: []byte{0, 1, 0xff},
		}}},
		"publish no payload": {Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
			Room: "a", Id: "c3",
		}}},
		"signal": {Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{
			Room: "a", Key: "cursor:u1", Payload: []byte(`[1,2]`),
		}}},
		"signal clear": {Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{
			Room: "a", Key: "typing:u1", Clear: true,
		}}},
		"ack":        {Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Room: "a", Seq: 42}}},
		"ping":       {Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: 3}}},
		"ping empty": {Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{}}},
		"refresh": {Kind: &corralv1.ClientFrame_Refresh{Refresh: &corralv1.Refresh{
			Token: "eyJhbGciOiJIUzI1NiJ9.e30.sig",
		}}},
		"refresh empty": {Kind: &corralv1.ClientFrame_Refresh{Refresh: &corralv1.Refresh{}}},
		"call": {Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{
			Id: 9, Method: "profile.get", Payload: []byte(`{"a":[1,2]}`),
		}}},
		"append text": {Kind: &corralv1.ClientFrame_Append{Append: &corralv1.Append{
			Room: "a", Id: "reply-1", Data: []byte("Hello, wor"), Version: 2,
		}}},
		"append replace final": {Kind: &corralv1.ClientFrame_Append{Append: &corralv1.Append{
			Room: "a", Id: "reply-1", Data: []byte(`{"text":"Hello, world"}`), Replace: true, Final: true,
		}}},
		"set state cas ttl": {Kind: &corralv1.ClientFrame_SetState{SetState: &corralv1.SetState{
			Room: "a", Key: "doc:title", Value: []byte(`"Draft"`), Cas: true, Version: 3, TtlMs: 60000, Ref: "s1",
		}}},
		"set state binary": {Kind: &corralv1.ClientFrame_SetState{SetState: &corralv1.SetState{
			Room: "a", Key: "blob", Value: []byte{0, 0xff},
		}}},
		"delete state": {Kind: &corralv1.ClientFrame_DeleteState{DeleteState: &corralv1.DeleteState{
			Room: "a", Key: "doc:title", Cas: true, Version: 4, Ref: "s2",
		}}},
	}
}

func serverFrames() map[string]*corralv1.ServerFrame {
	fs := map[string]*corralv1.ServerFrame{
		"presence snapshot": {Kind: &corralv1.ServerFrame_Presence{Presence: &corralv1.Presence{
			Room: "lobby", Snapshot: true, Members: 2, Connections: 3,
			Joins: []*corralv1.PresenceMember{
				{UserId: "ann", State: []byte(`{"name":"Ann"}`), Connections: 2},
				{UserId: "ben", State: []byte{0x01}, Connections: 1},
			},
		}}},
		"presence diff": {Kind: &corralv1.ServerFrame_Presence{Presence: &corralv1.Presence{
			Room: "lobby", Members: 2, Connections: 2,
			Joins:   []*corralv1.PresenceMember{{UserId: "cat", Connections: 1}},
			Updates: []*corralv1.PresenceMember{{UserId: "ann", State: []byte(`"away"`), Connections: 1}},
			Leaves:  []string{"ben", "dan"},
		}}},
		"presence counts": {Kind: &corralv1.ServerFrame_Presence{Presence: &corralv1.Presence{
			Room: "arena", CountsOnly: true, Members: 5000, Connections: 5200,
		}}},
		"call result": {Kind: &corralv1.ServerFrame_CallResult{CallResult: &corralv1.CallResult{
			Id: 9, Payload: []byte(`{"name":"Ann"}`),
		}}},
		"call error": {Kind: &corralv1.ServerFrame_CallResult{CallResult: &corralv1.CallResult{
			Id: 10, Error: &corralv1.Error{Code: corralv1.Code_CODE_UNAVAILABLE, Message: "retry later", RetryAfterMs: 1000},
		}}},
		"presence page": {Kind: &corralv1.ServerFrame_PresencePage{PresencePage: &corralv1.PresencePage{
			Room: "arena", Next: "u0150", Total: 5000,
			Members: []*corralv1.PresenceMember{{UserId: "u0101", Connections: 1}},
		}}},
		"welcome": {Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
			SessionId: "s1", ResumeToken: "rt", UserId: "u1", Resumed: true,
			HeartbeatMs: 25000, SessionTtlMs: 120000, ExpiresUnix: 1700003600,
		}}},
		"refreshed": {Kind: &corralv1.ServerFrame_Refreshed{Refreshed: &corralv1.Refreshed{
			ExpiresUnix: 1700007200,
		}}},
		"refreshed never": {Kind: &corralv1.ServerFrame_Refreshed{Refreshed: &corralv1.Refreshed{}}},
		"joined": {Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
			Room: "a", Seq: 10, Epoch: "e1", Resumed: true,
		}}},
		"joined replay": {Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
			Room: "a", Seq: 4, Epoch: "e1", Replay: true,
		}}},
		"replay end": {Kind: &corralv1.ServerFrame_ReplayEnd{ReplayEnd: &corralv1.ReplayEnd{
			Room: "a", Seq: 12,
		}}},
		"left": {Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{
			Room: "a", Code: corralv1.Code_CODE_FORBIDDEN, Reason: "kicked",
		}}},
		"message": sampleMessage(),
		"message sender info": {Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Room: "a", Seq: 2, Sender: "u1", Payload: []byte(`1`), SenderInfo: []byte(`{"name":"Ann"}`),
		}}},
		"presence info": {Kind: &corralv1.ServerFrame_Presence{Presence: &corralv1.Presence{
			Room: "lobby", Members: 2, Connections: 2,
			Joins: []*corralv1.PresenceMember{
				{UserId: "ann", Connections: 1, Info: []byte(`{"name":"Ann"}`)},
				{UserId: "ben", Connections: 1, Info: []byte{0x01}},
			},
		}}},
		"message binary": {Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Room: "a", Seq: 1, Payload: []byte{0xff, 0xfe}, TimeMs: -1,
		}}},
		"message max": {Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Seq: 1<<64 - 1, TimeMs: -1 << 63, Payload: []byte(`"a string"`),
		}}},
		"signal": {Kind: &corralv1.ServerFrame_Signal{Signal: &corralv1.SignalEvent{
			Room: "a", Key: "cursor:u1", Sender: "u1", Payload: []byte(`{"x":1}`),
		}}},
		"signal clear": {Kind: &corralv1.ServerFrame_Signal{Signal: &corralv1.SignalEvent{
			Room: "a", Key: "cursor:u1", Clear: true,
		}}},
		"published": {Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{
			Room: "a", Id: "c1", Seq: 11, Duplicate: true,
		}}},
		"pong": {Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Id: 3, TimeMs: 1700000000000}}},
		"reconnect": {Kind: &corralv1.ServerFrame_Reconnect{Reconnect: &corralv1.ReconnectHint{
			Code: corralv1.Code_CODE_GOING_AWAY, Reason: "draining", DelayMs: 1500,
		}}},
		"error": {Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
			Code: corralv1.Code_CODE_RATE_LIMITED, Message: "slow down", Room: "a",
			Ref: "c1", RetryAfterMs: 200,
		}}},
		"error unknown code": {Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
			Code: 4999,
		}}},
		"reset": {Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{
			Room: "a", Seq: 99, Epoch: "e2",
		}}},
		"batch empty": {Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{}}},
		"message chunk": {Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Room: "a", Seq: 12, Id: "reply-1", TimeMs: 1700000000000,
			Chunk: &corralv1.MessageChunk{MessageSeq: 10, Version: 3, Data: []byte("lo, wor")},
		}}},
		"message chunk delta final": {Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Room: "a", Seq: 13, Id: "reply-1",
			Chunk: &corralv1.MessageChunk{MessageSeq: 10, Version: 4, Replace: true, Final: true, Delta: []byte("5\n3:abcP@0,Z;")},
		}}},
		"state snapshot": {Kind: &corralv1.ServerFrame_StateSnapshot{StateSnapshot: &corralv1.StateSnapshot{
			Room: "a", Position: 41, Epoch: "e1", Entries: []*corralv1.StateEntry{
				{Key: "doc:title", Value: []byte(`"Draft"`), Version: 3},
				{Key: "lock", Value: []byte(`{"by":"ann"}`), Version: 1, ExpiresMs: 1700000060000},
			},
		}}},
		"state change delta": {Kind: &corralv1.ServerFrame_StateChange{StateChange: &corralv1.StateChange{
			Room: "a", Key: "doc:title", Version: 4, Position: 42, Epoch: "e1", Delta: []byte{7, 0xff},
		}}},
		"state change expired": {Kind: &corralv1.ServerFrame_StateChange{StateChange: &corralv1.StateChange{
			Room: "a", Key: "lock", Version: 2, Deleted: true, Expired: true, Position: 43, Epoch: "e1",
		}}},
		"state updated": {Kind: &corralv1.ServerFrame_StateUpdated{StateUpdated: &corralv1.StateUpdated{
			Room: "a", Key: "doc:title", Ref: "s1", Version: 4, Position: 42,
		}}},
	}
	fs["batch"] = &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{
		Frames: []*corralv1.ServerFrame{fs["message"], fs["signal"], fs["published"], fs["batch empty"]},
	}}}
	return fs
}

func sampleMessage() *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
		Room: "a", Seq: 7, Sender: "u1", Payload: []byte(`{"text":"hi"}`),
		TimeMs: 1700000000000, Id: "c1",
	}}}
}

func samplePublish() *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
		Room: "a", Id: "c1", Payload: []byte(`{"text":"hi"}`),
	}}}
}
