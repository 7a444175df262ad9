// Package safetext holds the two rules corral applies to text that crosses
// a trust boundary: which names it accepts (room names, user ids, signal
// and presence keys, grant patterns, API names: [CheckName]), and how it
// bounds the texts it sends back (close reasons, error messages:
// [Reason], [Quote]).
//
// Both live here so that every door uses the same rule: the edge, the
// core, the internal API and the authenticators call these functions and
// never check bytes themselves.
package safetext
