package api

import (
	"context"
	"errors"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
)

// Grant adds run-time grants for a user.
func (s *Service) Grant(ctx context.Context, req *corralv1.GrantRequest) (*corralv1.GrantResponse, error) {
	if err := s.o.Door.Grants().Grant(ctx, req.GetUserId(), req.GetJoin(), req.GetPublish()); err != nil {
		return nil, s.grantsError(err)
	}
	return &corralv1.GrantResponse{}, nil
}

// Revoke takes grants away from a user and removes the user's sessions on
// this core from the rooms they may no longer be in; other cores do the
// same when the store announces the change.
func (s *Service) Revoke(ctx context.Context, req *corralv1.RevokeRequest) (*corralv1.RevokeResponse, error) {
	// Under the door's Enforce the announcement of this change, which the
	// core's grantsLoop handles, cannot remove the memberships before this
	// call counts them.
	var (
		ids []string
		n   int
		err error
	)
	s.o.Door.Enforce(func() {
		if err = s.o.Door.Grants().Revoke(ctx, req.GetUserId(), req.GetJoin(), req.GetPublish()); err != nil {
			return
		}
		ids, n = s.core.EnforceGrants(ctx, req.GetUserId())
	})
	if err != nil {
		return nil, s.grantsError(err)
	}
	return &corralv1.RevokeResponse{SessionIds: ids, RoomsLeft: uint32(n)}, nil
}

func (s *Service) grantsError(err error) *connect.Error {
	if errors.Is(err, grants.ErrInvalid) {
		return connectErr(connect.CodeInvalidArgument, err)
	}
	if errors.Is(err, grants.ErrFull) {
		return connectErr(connect.CodeResourceExhausted, err)
	}
	return s.rpcError(err)
}
