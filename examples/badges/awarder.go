package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/internal/retry"
)

// bot is the sender of award messages; its own messages earn nothing.
const bot = "badges"

// awarder follows the event log and awards first-message badges.
type awarder struct {
	api       corralv1connect.RoomServiceClient
	statePath string
	log       *slog.Logger

	// crashAfter, when positive, makes run return errCrash right after
	// that many awards, before saving: a test's kill -9.
	crashAfter int
}

var errCrash = errors.New("badges: simulated crash")

// state is what survives a restart, saved in one file.
type state struct {
	// Position is where to resume in the event log; "" before the first
	// save (start at the live end).
	Position string `json:"position"`
	// Awarded holds the users who have their badge.
	Awarded map[string]bool `json:"awarded"`
}

// run follows the log until ctx ends, reconnecting with backoff after
// errors. Only the simulated crash and an unusable state file stop it.
func (a *awarder) run(ctx context.Context) error {
	st, err := a.load()
	if err != nil {
		return err
	}
	b, fromOldest := retry.Backoff{Base: 100 * time.Millisecond, Cap: 5 * time.Second, ResetAfter: 10 * time.Second}, false
	for ctx.Err() == nil {
		b.Start()
		err := a.stream(ctx, st, &corralv1.EventsRequest{After: st.Position, FromOldest: fromOldest && st.Position == ""})
		switch {
		case errors.Is(err, errCrash), ctx.Err() != nil:
			return err
		case connect.CodeOf(err) == connect.CodeOutOfRange:
			// The log no longer holds our position (corral in memory
			// restarted, or we were away longer than the log's
			// retention): events were lost. Say so, and go on from the
			// oldest event still held; awarded users are not awarded
			// twice.
			a.log.Error("the event log lost events after our position; resuming from the oldest retained", "position", st.Position, "err", err)
			st.Position, fromOldest = "", true
			continue
		}
		d := b.Next()
		a.log.Warn("events stream ended; reconnecting", "err", err, "in", d)
		retry.Sleep(ctx, d)
	}
	return ctx.Err()
}

// stream follows the log from req, handling each event, and saves the
// position after each response.
func (a *awarder) stream(ctx context.Context, st *state, req *corralv1.EventsRequest) error {
	req.Kinds = []corralv1.EventKind{corralv1.EventKind_EVENT_KIND_MESSAGE}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := a.api.Events(ctx, req)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		res, err := s.Receive()
		if err != nil {
			return err
		}
		for _, ev := range res.GetEvents() {
			if err := a.handle(ctx, st, ev.GetMessage()); err != nil {
				return err
			}
		}
		// The first response carries the start position: saving it right
		// away means a restart before any event still starts here.
		if res.GetPosition() != st.Position {
			st.Position = res.GetPosition()
			if err := a.save(st); err != nil {
				return err
			}
		}
	}
}

// handle awards msg's sender if this is their first message.
func (a *awarder) handle(ctx context.Context, st *state, msg *corralv1.Message) error {
	user := msg.GetSender()
	if user == "" || user == bot || st.Awarded[user] {
		return nil
	}
	payload, _ := json.Marshal(map[string]any{"badge": "first-message", "user": user, "for": msg.GetSeq()})
	res, err := a.api.Publish(ctx, &corralv1.PublishRequest{
		Room:    msg.GetRoom(),
		Payload: payload,
		Sender:  bot,
		// One key per award: a replay after a crash publishes nothing new.
		IdempotencyKey: "badge:first-message:" + user,
	})
	if err != nil {
		return fmt.Errorf("award %s: %w", user, err)
	}
	st.Awarded[user] = true
	a.log.Info("awarded", "user", user, "room", msg.GetRoom(), "seq", res.GetSeq(), "replay", res.GetDuplicate())
	if a.crashAfter > 0 {
		if a.crashAfter--; a.crashAfter == 0 {
			return errCrash
		}
	}
	return nil
}

func (a *awarder) load() (*state, error) {
	st := &state{Awarded: map[string]bool{}}
	b, err := os.ReadFile(a.statePath)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("badges: state file %s: %w", a.statePath, err)
	}
	if st.Awarded == nil {
		st.Awarded = map[string]bool{}
	}
	return st, nil
}

// save writes the state atomically: a crash leaves the old file or the
// new one, never half of one.
func (a *awarder) save(st *state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(a.statePath), ".badges-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), a.statePath)
}
