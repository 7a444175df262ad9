package checker

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/corral-rt/corral/delta"
)

// Value checks and growing-message checks verify what a member rebuilt
// from what it received against what was written: keyed state values and
// replaces sent as deltas (docs/DELTA.md), and a growing message's chunks
// (docs/MESSAGES.md). They are plain functions: a test or a load run
// records a member's updates, then checks them once.

// Update is one value a member received for a key: the whole value, or
// (IsDelta) a delta against the value it held at Version-1.
type Update struct {
	Version uint64
	Value   []byte
	Delta   []byte
	IsDelta bool
}

// Values rebuilds a member's value sequence from updates, applying each
// delta to the value it held before, and checks that every value equals
// what the writer set at that version (full[version]), that versions only
// grow, and that a delta comes only after the version it is against.
func Values(updates []Update, full map[uint64][]byte) error {
	var errs []error
	var held []byte
	var version uint64
	for i, u := range updates {
		v := u.Value
		if u.IsDelta {
			if u.Version != version+1 || i == 0 {
				errs = append(errs, fmt.Errorf("update %d: delta to version %d from version %d", i, u.Version, version))
				continue
			}
			var err error
			if v, err = delta.Apply(held, u.Delta, 0); err != nil {
				errs = append(errs, fmt.Errorf("update %d (version %d): %w", i, u.Version, err))
				continue
			}
		}
		if i > 0 && u.Version <= version {
			errs = append(errs, fmt.Errorf("update %d: version %d after %d", i, u.Version, version))
		}
		want, ok := full[u.Version]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("update %d: version %d was never written", i, u.Version))
		case !bytes.Equal(v, want):
			errs = append(errs, fmt.Errorf("update %d: version %d rebuilt as %q, written %q", i, u.Version, v, want))
		}
		held, version = v, u.Version
	}
	return errors.Join(errs...)
}

// Chunk is one chunk of a growing message as a member received it; the
// prefix a joiner gets first is a chunk with Replace set.
type Chunk struct {
	Seq     uint64
	Version uint64
	Data    []byte
	// Delta, when set, replaces Data: a delta against the body at
	// Version-1 (a replace sent as a delta).
	Delta   []byte
	Replace bool
	Final   bool
}

// Assembly checks a member's chunks of one growing message: exactly once
// and in order (each version one more than the one before, at a higher
// seq; the first may be any version, a joiner's prefix), nothing after the
// final chunk, the final mark when final is true, and the body rebuilt
// from them equal to want.
func Assembly(chunks []Chunk, want []byte, final bool) error {
	if len(chunks) == 0 {
		return errors.New("no chunk received")
	}
	var errs []error
	var body []byte
	for i, c := range chunks {
		if i > 0 {
			p := chunks[i-1]
			if c.Version != p.Version+1 {
				errs = append(errs, fmt.Errorf("chunk %d: version %d after %d", i, c.Version, p.Version))
			}
			if c.Seq <= p.Seq {
				errs = append(errs, fmt.Errorf("chunk %d: seq %d after %d", i, c.Seq, p.Seq))
			}
			if p.Final {
				errs = append(errs, fmt.Errorf("chunk %d: after the final chunk", i))
			}
		} else if !c.Replace && c.Version != 1 {
			errs = append(errs, fmt.Errorf("chunk 0: version %d is no prefix and not the first chunk", c.Version))
		}
		data := c.Data
		if c.Delta != nil {
			if !c.Replace {
				errs = append(errs, fmt.Errorf("chunk %d: a delta on an append", i))
				continue
			}
			var err error
			if data, err = delta.Apply(body, c.Delta, 0); err != nil {
				errs = append(errs, fmt.Errorf("chunk %d: %w", i, err))
				continue
			}
		}
		if c.Replace {
			body = append([]byte(nil), data...)
		} else {
			body = append(body, data...)
		}
	}
	if last := chunks[len(chunks)-1]; last.Final != final {
		errs = append(errs, fmt.Errorf("final mark %v, want %v", last.Final, final))
	}
	if !bytes.Equal(body, want) {
		errs = append(errs, fmt.Errorf("assembled %q, want %q", body, want))
	}
	return errors.Join(errs...)
}
