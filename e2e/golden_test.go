package e2e_test

import (
	"encoding/json"
	"os"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// golden is clients/js/test/golden/frames.json: frames as corral.v1.json
// text (wire) and as canonical protojson (proto). The SDK's codec tests
// read the same file.
type golden struct {
	Client []goldenFrame `json:"client"`
	Server []goldenFrame `json:"server"`
}

type goldenFrame struct {
	Name  string          `json:"name"`
	Wire  string          `json:"wire"`
	Proto json.RawMessage `json:"proto"`
}

func readGolden(t *testing.T) golden {
	t.Helper()
	data, err := os.ReadFile("../clients/js/test/golden/frames.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Client) == 0 || len(g.Server) == 0 {
		t.Fatal("golden file has no frames")
	}
	return g
}

// TestGoldenClientFrames checks that the Go codec writes each client frame
// exactly as the SDK does, and reads the SDK's bytes back to the same frame.
func TestGoldenClientFrames(t *testing.T) {
	for _, tc := range readGolden(t).Client {
		t.Run(tc.Name, func(t *testing.T) {
			want := new(corralv1.ClientFrame)
			if err := protojson.Unmarshal(tc.Proto, want); err != nil {
				t.Fatalf("golden proto: %v", err)
			}
			got, err := protocol.AppendClient(protocol.JSON, nil, want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.Wire {
				t.Errorf("Go encodes\n  %s\nSDK golden\n  %s", got, tc.Wire)
			}
			dec := new(corralv1.ClientFrame)
			if err := protocol.DecodeClient(protocol.JSON, []byte(tc.Wire), dec); err != nil {
				t.Fatalf("decode golden wire: %v", err)
			}
			if !proto.Equal(dec, want) {
				t.Errorf("decoded %v, want %v", dec, want)
			}
		})
	}
}

// TestGoldenServerFrames checks that the server writes each server frame
// as the SDK's decoder tests expect it.
func TestGoldenServerFrames(t *testing.T) {
	for _, tc := range readGolden(t).Server {
		t.Run(tc.Name, func(t *testing.T) {
			want := new(corralv1.ServerFrame)
			if err := protojson.Unmarshal(tc.Proto, want); err != nil {
				t.Fatalf("golden proto: %v", err)
			}
			got, err := protocol.AppendServer(protocol.JSON, nil, want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.Wire {
				t.Errorf("Go encodes\n  %s\nSDK golden\n  %s", got, tc.Wire)
			}
			dec := new(corralv1.ServerFrame)
			if err := protocol.DecodeServer(protocol.JSON, []byte(tc.Wire), dec); err != nil {
				t.Fatalf("decode golden wire: %v", err)
			}
			if !proto.Equal(dec, want) {
				t.Errorf("decoded %v, want %v", dec, want)
			}
		})
	}
}
