// Package delta encodes a value as a delta against the previous value a
// reader holds, and applies such deltas: what the room classes with deltas
// send instead of a full value when it is smaller (a growing message's
// replace, a keyed state's set; docs/DELTA.md).
//
// The format is Fossil's delta format (https://fossil-scm.org/home/doc/tip/www/delta_format.wiki),
// the one Centrifugo sends, so that existing decoders (npm fossil-delta)
// read it; corral's own decoders are this package's [Apply] and
// clients/js/src/delta.ts. A delta is text:
//
//	<target length>\n
//	<count>@<offset>,     copy count bytes of the source from offset
//	<count>:<bytes>       insert the count bytes that follow
//	<checksum>;           end: a 32-bit checksum of the target
//
// where every number is written in base 64 with the digits
// 0-9 A-Z _ a-z ~ (most significant first). The go.dev module of the
// algorithm Centrifugo uses (github.com/shadowspore/fossil-delta) is not
// reachable from this project's module proxy, so the encoder here is a
// port of Fossil's delta.c (rolling hash over 16-byte source blocks).
//
// Every function is pure and safe for concurrent use. [Apply] reads bytes
// from the network: it checks every count and offset against the source
// and the declared length before copying, and the length against a bound
// the caller gives, so a hostile delta costs at most that bound.
package delta
