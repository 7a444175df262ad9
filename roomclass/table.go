package roomclass

import (
	"sync/atomic"

	"github.com/corral-rt/corral/roompattern"
)

// Table is an ordered list of classes and the default class. It is
// immutable: build a new one to change it. Its methods may be called
// concurrently.
type Table struct {
	classes []*Class
	def     *Class
	// Version and Hash name the file the table came from: its "version"
	// key and the SHA-256 of its bytes (hex, 12 digits); empty when the
	// table was built from flags alone.
	Version, Hash string
}

// NewTable returns a table of classes (tried in order) and def, the class
// of rooms none matches. The classes are copied; check them first with
// [Check].
func NewTable(def Class, classes []Class) *Table {
	t := &Table{def: &def}
	t.def.Name, t.def.Match = "default", nil
	for i := range classes {
		c := classes[i]
		c.Match = append(Patterns(nil), c.Match...)
		t.classes = append(t.classes, &c)
	}
	return t
}

// Lookup returns the class of room: the first class with a pattern that
// matches it, or the default class. The result must not be modified.
func (t *Table) Lookup(room string) *Class {
	for _, c := range t.classes {
		if roompattern.Match(c.Match, room) {
			return c
		}
	}
	return t.def
}

// Default returns the default class.
func (t *Table) Default() *Class { return t.def }

// Classes returns the classes in match order, without the default class.
func (t *Table) Classes() []*Class { return append([]*Class(nil), t.classes...) }

// Live holds the table in force; Swap replaces it at once for every later
// Lookup. The zero value holds the built-in default ([Default]). All
// methods may be called concurrently.
type Live struct {
	t atomic.Pointer[Table]
}

// NewLive returns a Live holding t.
func NewLive(t *Table) *Live {
	l := new(Live)
	l.t.Store(t)
	return l
}

var builtin = NewTable(Default(), nil)

// Table returns the table in force.
func (l *Live) Table() *Table {
	if l == nil {
		return builtin
	}
	if t := l.t.Load(); t != nil {
		return t
	}
	return builtin
}

// Lookup is Table().Lookup(room).
func (l *Live) Lookup(room string) *Class { return l.Table().Lookup(room) }

// Swap puts t in force and returns the table it replaced.
func (l *Live) Swap(t *Table) *Table {
	old := l.t.Swap(t)
	if old == nil {
		old = builtin
	}
	return old
}
