package roomclass

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-rt/corral/roompattern"
)

// MaxWriteDelay is the longest write-delay a class may have: past it the
// delay is latency no live room wants, and buffered messages pile up.
const MaxWriteDelay = time.Second

// CheckOptions are the server settings a class is checked against.
type CheckOptions struct {
	// SessionTTL is how long a dropped session stays resumable: a history
	// that lives less would reset every resume. Zero: not checked.
	SessionTTL time.Duration
}

// Check reports every problem of classes (in match order) and def: the
// same checks as [DecodeClasses], for classes built otherwise (the
// default class alone, from the settings).
// The error, when not nil, is [Errors] located in "flags".
func Check(def Class, classes []Class, opts CheckOptions) error {
	errs := check("flags", def, classes, make([]classLines, len(classes)), opts)
	sortErrors(errs)
	return errs.orNil()
}

// check is every problem of classes, which lines locates (a zero
// classLines: no lines known).
func check(file string, def Class, classes []Class, lines []classLines, opts CheckOptions) Errors {
	var errs Errors
	add := func(line int, path, format string, args ...any) {
		errs = append(errs, Error{File: file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if opts.SessionTTL > 0 && def.History.TTL > 0 && def.History.TTL < opts.SessionTTL {
		add(0, "history-ttl", "%v is shorter than the session TTL (%v): a resumed session would find its rooms reset", def.History.TTL, opts.SessionTTL)
	}
	names := map[string]int{}
	type earlier struct {
		pattern, class string
	}
	var before []earlier
	for i, c := range classes {
		cl := lines[i]
		p := fmt.Sprintf("rooms[%d]", i)
		if c.Name != "" {
			p = fmt.Sprintf("rooms[%d](%s)", i, c.Name)
		}
		switch j, dup := names[c.Name]; {
		case c.Name == "":
			add(cl.line, p+".name", "missing: every class needs a name")
		case c.Name == "default":
			add(cl.at("name"), p+".name", `"default" is the class of unmatched rooms, set by the flags: pick another name`)
		case dup:
			add(cl.at("name"), p+".name", "the name of class rooms[%d] too: names must be unique", j)
		default:
			names[c.Name] = i
		}
		if len(c.Match) == 0 {
			add(cl.at("match"), p+".match", "missing: a class needs at least one room pattern")
		}
		for k, pat := range c.Match {
			line := cl.at("match")
			if k < len(cl.match) {
				line = cl.match[k]
			}
			mp := fmt.Sprintf("%s.match[%d]", p, k)
			if err := roompattern.Check(pat); err != nil {
				add(line, mp, "%v", err)
				continue
			}
			for _, e := range before {
				if Subsumes(e.pattern, pat) {
					add(line, mp, "%q can never match: class %q's pattern %q, earlier in the list, matches every room it does (first match wins: move this class up)", pat, e.class, e.pattern)
					break
				}
			}
		}
		for _, pat := range c.Match {
			before = append(before, earlier{pat, c.Name})
		}
		if c.History.Size < 1 {
			add(cl.at("history.size"), p+".history.size", "%d: want at least 1 (a room's order needs its newest message)", c.History.Size)
		}
		switch {
		case c.History.TTL <= 0:
			add(cl.at("history.ttl"), p+".history.ttl", "%v: want a positive duration, e.g. 24h", c.History.TTL)
		case opts.SessionTTL > 0 && c.History.TTL < opts.SessionTTL:
			add(cl.at("history.ttl"), p+".history.ttl", "%v is shorter than the session TTL (%v): a resumed session would find its rooms reset", c.History.TTL, opts.SessionTTL)
		}
		if c.Presence.MaxDiff < 0 {
			add(cl.at("presence.max-diff"), p+".presence.max-diff", "%d: must not be negative", c.Presence.MaxDiff)
		}
		if c.Presence.Grace < 0 {
			add(cl.at("presence.grace"), p+".presence.grace", "%v: must not be negative", c.Presence.Grace)
		}
		if c.SignalTick <= 0 {
			add(cl.at("signal-tick"), p+".signal-tick", "%v: want a positive duration, e.g. 16ms", c.SignalTick)
		}
		if c.WriteDelay < 0 || c.WriteDelay > MaxWriteDelay {
			add(cl.at("write-delay"), p+".write-delay", "%v: want 0 (no delay) up to %v", c.WriteDelay, MaxWriteDelay)
		}
		if c.MaxMembers < 0 {
			add(cl.at("max-members"), p+".max-members", "%d: must not be negative (0: unlimited)", c.MaxMembers)
		}
		if c.MaxPayload <= 0 {
			add(cl.at("max-payload"), p+".max-payload", "%d: want a positive number of bytes", c.MaxPayload)
		}
		if c.State.MaxKeys <= 0 {
			add(cl.at("state.max-keys"), p+".state.max-keys", "%d: want a positive number of keys", c.State.MaxKeys)
		}
		if c.State.MaxValue <= 0 {
			add(cl.at("state.max-value"), p+".state.max-value", "%d: want a positive number of bytes", c.State.MaxValue)
		}
		if c.State.TTL < 0 {
			add(cl.at("state.ttl"), p+".state.ttl", "%v: must not be negative (0: none)", c.State.TTL)
		}
		if c.PublishRate == 0 {
			add(cl.at("publish-rate"), p+".publish-rate", "0 would refuse every publish: use publish: none for a read-only class, or a negative rate for unlimited")
		}
		if c.PublishRate > 0 && c.PublishBurst < 1 {
			add(cl.at("publish-burst"), p+".publish-burst", "%d: want at least 1 with a publish-rate", c.PublishBurst)
		}
		if c.Growing.MaxBytes <= 0 {
			add(cl.at("growing.max-bytes"), p+".growing.max-bytes", "%d: want a positive number of bytes", c.Growing.MaxBytes)
		}
		if c.Growing.AppendRate == 0 {
			add(cl.at("growing.append-rate"), p+".growing.append-rate", "0 would refuse every append: use publish: none for a read-only class, or a negative rate for unlimited")
		}
		if c.Growing.AppendRate > 0 && c.Growing.AppendBurst < 1 {
			add(cl.at("growing.append-burst"), p+".growing.append-burst", "%d: want at least 1 with an append-rate", c.Growing.AppendBurst)
		}
		if c.Hooks.JoinPolicy != Closed && c.Hooks.JoinPolicy != AllowKnown {
			add(cl.at("hooks.join-policy"), p+".hooks.join-policy", "%q: want closed or allow-known", c.Hooks.JoinPolicy)
		}
		if c.Hooks.PublishPolicy != Closed && c.Hooks.PublishPolicy != Open {
			add(cl.at("hooks.publish-policy"), p+".hooks.publish-policy", "%q: want closed or open", c.Hooks.PublishPolicy)
		}
		if c.Hooks.JoinCacheTTL < 0 {
			add(cl.at("hooks.join-cache-ttl"), p+".hooks.join-cache-ttl", "%v: must not be negative (0: no cache)", c.Hooks.JoinCacheTTL)
		}
		if c.Publish == None && c.Hooks.Publish {
			add(cl.at("hooks.publish"), p+".hooks.publish", "the class is read-only for clients (publish: none): a publish hook would never be called")
		}
	}
	return errs
}

// Subsumes reports whether every room pattern p matches is also matched
// by q, for the cases it can decide: q is "*", q equals p, q is a prefix
// pattern ("a:*") and p's fixed start begins with that prefix, or q is a
// suffix pattern ("*:chat") and p's fixed end ends with it. Otherwise it
// reports false (it may miss a subsumption, never claims a false one).
func Subsumes(q, p string) bool {
	if q == p {
		return true
	}
	n := strings.Count(q, "*")
	if n != 1 {
		return false
	}
	head, tail := fixedEnds(p)
	switch {
	case strings.HasSuffix(q, "*"):
		return strings.HasPrefix(head, q[:len(q)-1])
	case strings.HasPrefix(q, "*"):
		return strings.HasSuffix(tail, q[1:])
	}
	return false
}

// fixedEnds is the text of p before its first '*' and after its last (all
// of p, twice, when it has none).
func fixedEnds(p string) (head, tail string) {
	i := strings.IndexByte(p, '*')
	if i < 0 {
		return p, p
	}
	return p[:i], p[strings.LastIndexByte(p, '*')+1:]
}

func sortErrors(errs Errors) {
	slices.SortStableFunc(errs, func(a, b Error) int { return cmp.Compare(a.Line, b.Line) })
}
