package core

import (
	"context"
	"strings"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// A History page is bounded in bytes: 100 messages of ~60 KiB come back
// in pages of at most maxHistoryPageBytes, each saying there is more,
// and paging on returns every message once, in order.
func TestHistoryPageBytesBounded(t *testing.T) {
	ctx := context.Background()
	c := newTestCore(t, Config{})
	big := []byte(`"` + strings.Repeat("x", 60<<10) + `"`)
	const n = 100
	for i := range n {
		if _, err := c.Publish(ctx, &corralv1.PublishRequest{Room: "big", Payload: big}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	var got []uint64
	after := uint64(0)
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		resp, err := c.History(ctx, &corralv1.HistoryRequest{Room: "big", AfterSeq: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, m := range resp.GetMessages() {
			size += proto.Size(m)
			got = append(got, m.GetSeq())
		}
		if size > maxHistoryPageBytes {
			t.Fatalf("page of %d bytes, bound %d", size, maxHistoryPageBytes)
		}
		if !resp.GetMore() {
			break
		}
		after = resp.GetMessages()[len(resp.GetMessages())-1].GetSeq()
	}
	if len(got) != n {
		t.Fatalf("paged %d messages, want %d", len(got), n)
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("message %d has seq %d", i, s)
		}
	}
}

// The History of a room that never existed reads as empty and does not
// make the room: no epoch is invented for it.
func TestHistoryOfUnknownRoomPeeks(t *testing.T) {
	c := newTestCore(t, Config{})
	resp, err := c.History(context.Background(), &corralv1.HistoryRequest{Room: "never-was"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetMessages()) != 0 || resp.GetEpoch() != "" || resp.GetLastSeq() != 0 {
		t.Fatalf("History of an unknown room = %v, want an empty page with no epoch", resp)
	}
}
