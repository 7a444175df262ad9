package delta

import (
	"errors"
	"fmt"
)

// ErrBad is returned (wrapped) by [Apply] for a delta that is malformed,
// does not fit its source, fails its checksum, or yields more than the
// caller's bound.
var ErrBad = errors.New("delta: bad delta")

// nhash is the block size of the encoder's rolling hash (delta.c NHASH).
const nhash = 16

const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"

// digitValue maps a byte to its base-64 digit value, -1 for a non-digit.
var digitValue = func() (v [256]int8) {
	for i := range v {
		v[i] = -1
	}
	for i := range len(digits) {
		v[digits[i]] = int8(i)
	}
	return v
}()

// appendInt appends v in base 64, most significant digit first.
func appendInt(b []byte, v uint64) []byte {
	if v == 0 {
		return append(b, '0')
	}
	var buf [11]byte
	i := len(buf)
	for v > 0 {
		i--
		buf[i] = digits[v&63]
		v >>= 6
	}
	return append(b, buf[i:]...)
}

// intLen is how many digits appendInt writes for v.
func intLen(v int) int {
	n := 1
	for v >= 64 {
		n++
		v >>= 6
	}
	return n
}

// checksum is delta.c's: four byte lanes summed, then folded.
func checksum(z []byte) uint32 {
	var s0, s1, s2, s3 uint32
	for len(z) >= 4 {
		s0 += uint32(z[0])
		s1 += uint32(z[1])
		s2 += uint32(z[2])
		s3 += uint32(z[3])
		z = z[4:]
	}
	s3 += s2<<8 + s1<<16 + s0<<24
	switch len(z) {
	case 3:
		s3 += uint32(z[2]) << 8
		fallthrough
	case 2:
		s3 += uint32(z[1]) << 16
		fallthrough
	case 1:
		s3 += uint32(z[0]) << 24
	}
	return s3
}

// rolling is the encoder's rolling hash over nhash bytes.
type rolling struct {
	a, b uint16
	i    int
	z    [nhash]byte
}

func (h *rolling) init(z []byte) {
	a, b := uint16(z[0]), uint16(z[0])
	for i := 1; i < nhash; i++ {
		a += uint16(z[i])
		b += a
	}
	h.a, h.b, h.i = a, b, 0
	copy(h.z[:], z[:nhash])
}

func (h *rolling) next(c byte) {
	old := h.z[h.i]
	h.z[h.i] = c
	h.i = (h.i + 1) & (nhash - 1)
	h.a = h.a - uint16(old) + uint16(c)
	h.b = h.b - nhash*uint16(old) + h.a
}

func (h *rolling) sum() uint32 { return uint32(h.a) | uint32(h.b)<<16 }

// Encode returns a delta that turns src into target.
func Encode(src, target []byte) []byte {
	out := appendInt(make([]byte, 0, 32), uint64(len(target)))
	out = append(out, '\n')
	if len(src) <= nhash {
		// As delta.c, an insert even of nothing: the same bytes as the
		// reference encoders.
		out = appendInt(out, uint64(len(target)))
		out = append(out, ':')
		out = append(out, target...)
		out = appendInt(out, uint64(checksum(target)))
		return append(out, ';')
	}

	// Index the source's blocks by their hash: landmark is the newest
	// block of each bucket, collide chains the older ones.
	nHash := len(src) / nhash
	collide := make([]int, nHash)
	landmark := make([]int, nHash)
	for i := range landmark {
		landmark[i] = -1
		collide[i] = -1
	}
	var h rolling
	for i := 0; i < len(src)-nhash; i += nhash {
		h.init(src[i:])
		hv := int(h.sum() % uint32(nHash))
		collide[i/nhash] = landmark[hv]
		landmark[hv] = i / nhash
	}

	base := 0
	for base+nhash < len(target) {
		h.init(target[base:])
		i := 0
		bestCnt, bestOfst, bestLitsz := 0, 0, 0
		for {
			hv := int(h.sum() % uint32(nHash))
			limit := 250
			for block := landmark[hv]; block >= 0 && limit > 0; block = collide[block] {
				limit--
				iSrc := block * nhash
				// The match forward from iSrc, then backward from it.
				j := 0
				for x, y := iSrc, base+i; x < len(src) && y < len(target) && src[x] == target[y]; x, y = x+1, y+1 {
					j++
				}
				j--
				k := 1
				for k < iSrc && k <= i && src[iSrc-k] == target[base+i-k] {
					k++
				}
				k--
				ofst, cnt, litsz := iSrc-k, j+k+1, i-k
				sz := intLen(litsz) + intLen(cnt) + intLen(ofst) + 3
				if cnt >= sz && cnt > bestCnt {
					bestCnt, bestOfst, bestLitsz = cnt, ofst, litsz
				}
			}
			if bestCnt > 0 {
				if bestLitsz > 0 {
					out = appendInt(out, uint64(bestLitsz))
					out = append(out, ':')
					out = append(out, target[base:base+bestLitsz]...)
					base += bestLitsz
				}
				out = appendInt(out, uint64(bestCnt))
				out = append(out, '@')
				out = appendInt(out, uint64(bestOfst))
				out = append(out, ',')
				base += bestCnt
				break
			}
			if base+i+nhash >= len(target) {
				out = appendInt(out, uint64(len(target)-base))
				out = append(out, ':')
				out = append(out, target[base:]...)
				base = len(target)
				break
			}
			h.next(target[base+i+nhash])
			i++
		}
	}
	if base < len(target) {
		out = appendInt(out, uint64(len(target)-base))
		out = append(out, ':')
		out = append(out, target[base:]...)
	}
	out = appendInt(out, uint64(checksum(target)))
	return append(out, ';')
}

// reader reads a delta's numbers and commands.
type reader struct {
	b []byte
	i int
}

// int reads a base-64 number; it refuses none and more than 10 digits
// (60 bits: past any length a bound allows).
func (r *reader) int() (uint64, error) {
	start := r.i
	var v uint64
	for r.i < len(r.b) {
		d := digitValue[r.b[r.i]]
		if d < 0 {
			break
		}
		if r.i-start == 10 {
			return 0, fmt.Errorf("%w: number too long at %d", ErrBad, start)
		}
		v = v<<6 | uint64(d)
		r.i++
	}
	if r.i == start {
		return 0, fmt.Errorf("%w: number expected at %d", ErrBad, start)
	}
	return v, nil
}

func (r *reader) expect(c byte) error {
	if r.i >= len(r.b) || r.b[r.i] != c {
		return fmt.Errorf("%w: %q expected at %d", ErrBad, c, r.i)
	}
	r.i++
	return nil
}

// Apply returns the target that delta encodes against src. A target
// longer than maxLen bytes is refused before anything is allocated for
// it (maxLen <= 0: no bound but the delta's own, which a caller reading
// network bytes should not rely on). Errors wrap [ErrBad].
func Apply(src, delta []byte, maxLen int) ([]byte, error) {
	r := reader{b: delta}
	n, err := r.int()
	if err != nil {
		return nil, err
	}
	if err := r.expect('\n'); err != nil {
		return nil, err
	}
	if maxLen > 0 && n > uint64(maxLen) {
		return nil, fmt.Errorf("%w: target of %d bytes, more than %d", ErrBad, n, maxLen)
	}
	// The target is built up to n; reserve no more than the delta can
	// plausibly produce before it has proved itself.
	out := make([]byte, 0, min(n, uint64(len(src)+len(delta))))
	for r.i < len(r.b) {
		cnt, err := r.int()
		if err != nil {
			return nil, err
		}
		if r.i >= len(r.b) {
			break
		}
		op := r.b[r.i]
		r.i++
		switch op {
		case '@':
			ofst, err := r.int()
			if err != nil {
				return nil, err
			}
			if err := r.expect(','); err != nil {
				return nil, err
			}
			if uint64(len(out))+cnt > n {
				return nil, fmt.Errorf("%w: copy past the target's length", ErrBad)
			}
			if ofst > uint64(len(src)) || cnt > uint64(len(src))-ofst {
				return nil, fmt.Errorf("%w: copy of %d bytes at %d past the source's %d", ErrBad, cnt, ofst, len(src))
			}
			out = append(out, src[ofst:ofst+cnt]...)
		case ':':
			if uint64(len(out))+cnt > n {
				return nil, fmt.Errorf("%w: insert past the target's length", ErrBad)
			}
			if cnt > uint64(len(r.b)-r.i) {
				return nil, fmt.Errorf("%w: insert of %d bytes past the delta's end", ErrBad, cnt)
			}
			out = append(out, r.b[r.i:r.i+int(cnt)]...)
			r.i += int(cnt)
		case ';':
			if uint64(len(out)) != n {
				return nil, fmt.Errorf("%w: target of %d bytes, %d declared", ErrBad, len(out), n)
			}
			if uint64(checksum(out)) != cnt {
				return nil, fmt.Errorf("%w: checksum mismatch", ErrBad)
			}
			if r.i != len(r.b) {
				return nil, fmt.Errorf("%w: bytes after the end", ErrBad)
			}
			return out, nil
		default:
			return nil, fmt.Errorf("%w: unknown command %q at %d", ErrBad, op, r.i-1)
		}
	}
	return nil, fmt.Errorf("%w: unterminated", ErrBad)
}
