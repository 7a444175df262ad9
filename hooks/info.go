package hooks

import (
	"encoding/json"
	"fmt"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Member info: the JSON the Connect and Join hooks may give a member
// (ConnectResponse.info, JoinResult.info), shown to other members in
// presence and on its messages.

// MaxInfo bounds a member's info in bytes.
const MaxInfo = 4096

// checkInfo reports why info is not acceptable member info: longer than
// MaxInfo, or not valid JSON. Empty info is acceptable (none).
func checkInfo(info []byte) error {
	if len(info) > MaxInfo {
		return fmt.Errorf("member info of %d bytes (at most %d)", len(info), MaxInfo)
	}
	if len(info) > 0 && !json.Valid(info) {
		return fmt.Errorf("member info is not valid JSON")
	}
	return nil
}

// badInfoRefusal replaces a JoinResult whose info is not acceptable: the
// pair is refused, as the backend's answer cannot be used.
func badInfoRefusal() *corralv1.JoinResult {
	return &corralv1.JoinResult{Refusal: &corralv1.Refusal{
		Code:   corralv1.Code_CODE_FORBIDDEN,
		Reason: "the application gave invalid member info",
	}}
}
