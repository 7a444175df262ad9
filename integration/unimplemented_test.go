package integration_test

import (
	"errors"
	"io"
	"testing"

	"connectrpc.com/connect/v2"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// TestGrowingUnimplemented: the internal API's methods of growing
// messages exist in the contract before the core serves them (issue 39): each answers unimplemented, over every transport, and
// changes nothing. TestBadInput does the same for the client frames
// (error 4410).
func TestGrowingUnimplemented(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			api := apiOver(d, tr, testAPIKey)
			calls := map[string]func() error{
				"GetMessage": func() error {
					_, err := api.GetMessage(ctx, &corralv1.GetMessageRequest{Room: "r", Id: "m"})
					return err
				},
			}
			calls["Append"] = func() error {
				s, err := api.Append(ctx)
				if err != nil {
					return err
				}
				// Send reports io.EOF when the server has answered; the
				// answer is CloseAndReceive's.
				if err := s.Send(&corralv1.AppendRequest{Room: "r", Id: "m", Data: []byte("x"), Final: true}); err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				_, err = s.CloseAndReceive()
				return err
			}
			for name, call := range calls {
				if err := call(); connect.CodeOf(err) != connect.CodeUnimplemented {
					t.Errorf("%s: %v, want unimplemented", name, err)
				}
			}
		})
	}
}
