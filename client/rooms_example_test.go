package client_test

import (
	"fmt"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// An Assembler fed a joiner's frames: the prefix (a replace chunk), a
// replayed chunk it ignores, and the final chunk.
func ExampleAssembler() {
	a := client.NewAssembler()
	for _, m := range []*corralv1.Message{
		{Room: "chat", Seq: 19, Id: "a7", Chunk: &corralv1.MessageChunk{MessageSeq: 17, Version: 2, Data: []byte("Hello"), Replace: true}},
		{Room: "chat", Seq: 18, Id: "a7", Chunk: &corralv1.MessageChunk{MessageSeq: 17, Version: 1, Data: []byte("Hel")}},
		{Room: "chat", Seq: 20, Id: "a7", Chunk: &corralv1.MessageChunk{MessageSeq: 17, Version: 3, Data: []byte("!"), Final: true}},
	} {
		g, applied, err := a.Feed(m)
		fmt.Printf("%v %q v%d final=%v %v\n", applied, g.Body, g.Version, g.Final, err)
	}
	// Output:
	// true "Hello" v2 final=false <nil>
	// false "Hello" v2 final=false <nil>
	// true "Hello!" v3 final=true <nil>
}

// A State from a snapshot and a change (in a program: the StateSnapshot
// and StateChange frames of Conn.Frames).
func ExampleState() {
	st := client.NewState("doc")
	st.Snapshot(&corralv1.StateSnapshot{Room: "doc", Position: 1, Epoch: "e1", Entries: []*corralv1.StateEntry{
		{Key: "title", Value: []byte(`"Draft"`), Version: 1},
	}})
	_, err := st.Change(&corralv1.StateChange{Room: "doc", Key: "title", Value: []byte(`"Final"`), Version: 2, Position: 2, Epoch: "e1"})
	e, _ := st.Get("title")
	fmt.Println(string(e.Value), e.Version, st.Position, err)
	// Output: "Final" 2 2 <nil>
}
