package protocol_test

import (
	"fmt"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

func ExampleAppendServer() {
	msg := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
		Room:    "lobby",
		Seq:     42,
		Sender:  "alice",
		Payload: []byte(`{"text":"hi"}`),
		TimeMs:  1700000000000,
		Id:      "c1",
	}}}
	b, err := protocol.AppendServer(protocol.JSON, nil, msg)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
	// Output:
	// {"message":{"room":"lobby","seq":42,"sender":"alice","payload":{"text":"hi"},"timeMs":1700000000000,"id":"c1"}}
}

func ExampleAppendBatch() {
	// Encode once, splice into many batches.
	pong, _ := protocol.AppendServer(protocol.JSON, nil, &corralv1.ServerFrame{
		Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Id: 1}},
	})
	left, _ := protocol.AppendServer(protocol.JSON, nil, &corralv1.ServerFrame{
		Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{Room: "lobby"}},
	})
	fmt.Println(string(protocol.AppendBatch(protocol.JSON, nil, [][]byte{pong, left})))
	// Output:
	// {"batch":{"frames":[{"pong":{"id":1}},{"left":{"room":"lobby"}}]}}
}

func ExampleDecodeClient() {
	data := []byte(`{"publish":{"room":"lobby","id":"c1","payload":{"text":"hi"}}}`)
	var f corralv1.ClientFrame
	if err := protocol.DecodeClient(protocol.JSON, data, &f); err != nil {
		panic(err)
	}
	p := f.GetPublish()
	fmt.Printf("%s %s %s\n", p.Room, p.Id, p.Payload)
	// Output:
	// lobby c1 {"text":"hi"}
}

func ExampleAdviceOf() {
	for _, c := range []corralv1.Code{
		corralv1.Code_CODE_GOING_AWAY,
		corralv1.Code_CODE_RATE_LIMITED,
		corralv1.Code_CODE_FORBIDDEN,
	} {
		fmt.Println(c, protocol.AdviceOf(c))
	}
	// Output:
	// CODE_GOING_AWAY resume
	// CODE_RATE_LIMITED retry
	// CODE_FORBIDDEN stop
}
