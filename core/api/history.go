package api

import (
	"context"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// maxHistoryPageBytes bounds the messages of one History page.
const maxHistoryPageBytes = 4 << 20

// History reads a page of a room's retained messages.
func (s *Service) History(ctx context.Context, req *corralv1.HistoryRequest) (*corralv1.HistoryResponse, error) {
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	page, err := s.o.History.Read(ctx, history.Query{
		Room:    req.GetRoom(),
		After:   req.GetAfterSeq(),
		Before:  req.GetBeforeSeq(),
		Reverse: req.GetReverse(),
		Limit:   int(req.GetLimit()),
		// A read of a room that never existed must not create it: a
		// caller naming made-up rooms would grow the store.
		Peek: true,
		// A page is bounded in bytes as well as in count (1,000 messages
		// of 64 KiB would be 64 MiB): past maxHistoryPageBytes the page
		// ends early and says there is more. The first message always
		// fits.
		MaxBytes: maxHistoryPageBytes,
		// A growing message is one entry, never split across pages.
		Assembled: true,
	})
	if err != nil {
		return nil, s.rpcError(err)
	}
	return &corralv1.HistoryResponse{
		Messages: page.Messages,
		Epoch:    page.Epoch,
		LastSeq:  page.Last,
		FirstSeq: page.First,
		More:     page.More,
		NextSeq:  page.Next,
	}, nil
}
