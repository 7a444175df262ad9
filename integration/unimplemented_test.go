package integration_test

import (
	"testing"

	"connectrpc.com/connect/v2"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// TestStateAndGrowingUnimplemented: the internal API's methods of keyed
// state exist in the contract before the core serves them (issue 39;
// growing messages are served: grow_test.go): each answers unimplemented, over every transport, and
// changes nothing. TestBadInput does the same for the client frames
// (error 4410).
func TestStateAndGrowingUnimplemented(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			api := apiOver(d, tr, testAPIKey)
			calls := map[string]func() error{
				"SetState": func() error {
					_, err := api.SetState(ctx, &corralv1.SetStateRequest{Room: "r", Key: "k", Value: []byte("1")})
					return err
				},
				"DeleteState": func() error {
					_, err := api.DeleteState(ctx, &corralv1.DeleteStateRequest{Room: "r", Key: "k"})
					return err
				},
				"GetState": func() error {
					_, err := api.GetState(ctx, &corralv1.GetStateRequest{Room: "r"})
					return err
				},
			}
			for name, call := range calls {
				if err := call(); connect.CodeOf(err) != connect.CodeUnimplemented {
					t.Errorf("%s: %v, want unimplemented", name, err)
				}
			}
		})
	}
}
