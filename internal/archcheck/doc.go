// Package archcheck holds no code: its tests check rules of the whole
// house — that the imports between the module's packages are exactly the
// arrows docs/ARCHITECTURE.md lists, so that the whiteboard of the house
// stays true as the house changes (inside core too), that every hop the
// page's flows name is a function or method the code declares, that no
// type under core/ gathers more than 30 methods nor exports a name ending
// in Locked (a lock's state is its package's own), that intervals are timed
// on the monotonic clock (internal/mono), never on wall-clock nanoseconds,
// that every shell block of README.md and docs/*.md is marked as run by a
// named test or as illustrative, and that the tests' sleeps stay within a
// budget that only goes down (internal/eventually, testing/synctest).
package archcheck
