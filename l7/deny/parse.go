package deny

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Parse verifies a deny file against a public key and indexes it. It
// accepts only the canonical encoding Build writes (see the package doc).
func Parse(data []byte, pub ed25519.PublicKey) (*List, error) {
	return parse(nil, data, pub, nil)
}

func parse(prev *List, data []byte, pub ed25519.PublicKey, fn CIDRFunc) (*List, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %d bytes is over the %d limit", ErrMalformed, len(data), MaxFileBytes)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: public key is %d bytes, want %d", ErrSignature, len(pub), ed25519.PublicKeySize)
	}
	var po *envelope.Opened
	if prev != nil {
		po = prev.opened
	}
	o, err := envelope.OpenLimit(data, pub, Format, po, MaxFileBytes)
	if err != nil {
		return nil, openError(data, err)
	}
	if o.Version.Epoch != 0 {
		return nil, fmt.Errorf("%w: epoch %d: a deny list has epoch 0 (it is ordered by sequence alone)", ErrMalformed, o.Version.Epoch)
	}
	body := o.Body()
	var l *List
	if po != nil && prev.raw != nil {
		l = decodeNext(prev, body, o.Blocks())
	}
	if l == nil {
		if l, err = decodeList(body, &cutCheck{cuts: o.Cuts()}, fn); err != nil {
			return nil, err
		}
	}
	l.raw, l.opened = body, o
	l.seq, l.created, l.digest, l.keyID = o.Version.Sequence, o.Created, o.Manifest, o.KeyID
	return l, nil
}

// openError files an envelope error under this package's sentinels (both
// match with errors.Is).
func openError(data []byte, err error) error {
	switch {
	case errors.Is(err, envelope.ErrFormat) && bytes.HasPrefix(data, []byte(`{"format":"rampart.deny.v1",`)):
		return fmt.Errorf("%w: a rampart.deny.v1 file (the format before the signed envelope): this version reads only %s; build it again with `rampart deny build`: %w",
			ErrMalformed, Format, err)
	case errors.Is(err, envelope.ErrDigest):
		return fmt.Errorf("%w: %w", ErrDigest, err)
	case errors.Is(err, envelope.ErrSignature), errors.Is(err, envelope.ErrKeyID):
		return fmt.Errorf("%w: %w", ErrSignature, err)
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

// decodeList parses the canonical list bytes and indexes the entries,
// checking the block cuts against the rule (cc, if not nil) and giving
// each CIDR entry to fn (if not nil) once it is validated.
func decodeList(b []byte, cc *cutCheck, fn CIDRFunc) (*List, error) {
	s := scanner{b: b}
	var bl builder
	bl.init(b)
	var prev, cur norm
	var vbuf, rbuf, cbuf, lastExp []byte
	var lastExpAt int64
	malformed := func(what string) (*List, error) {
		return nil, fmt.Errorf("%w: list: %s at byte %d (entry %d)", ErrMalformed, what, s.i, bl.n+1)
	}
	invalid := func(err error) (*List, error) {
		return nil, fmt.Errorf("%w: entry %d (%s %.64q): %w", ErrInvalid, bl.n+1, cur.kind, cur.value, err)
	}
	if !s.lit(`{"entries":[`) {
		return malformed(`want {"entries":[`)
	}
	rec := s.i
	for i := 0; !s.lit("]"); i++ {
		if i > 0 && !s.lit(",") {
			return malformed("want , or ]")
		}
		if i > 0 && cc != nil && !cc.at(b[rec:s.i-1], s.i) {
			return malformed("the blocks are not cut where the rule puts cuts (not the canonical encoding)")
		}
		rec = s.i
		if bl.n >= MaxEntries {
			return malformed(fmt.Sprintf("more than %d entries", MaxEntries))
		}
		if !s.lit(`{"kind":`) {
			return malformed(`want {"kind":`)
		}
		k, ok := s.raw()
		ki := kindIndex(Kind(k))
		if !ok || ki < 0 {
			return malformed(fmt.Sprintf("unknown kind %q", k))
		}
		cur = norm{kind: kinds[ki]}
		if !s.lit(`,"value":`) {
			return malformed(`want ,"value":`)
		}
		if vbuf, ok = s.str(vbuf[:0]); !ok {
			return malformed("bad value string")
		}
		if !s.lit(`,"expires_at":`) {
			return malformed(`want ,"expires_at":`)
		}
		exp, ok := s.raw()
		if !ok {
			return malformed("bad expires_at string")
		}
		rbuf = rbuf[:0]
		if s.lit(`,"reason":`) {
			if rbuf, ok = s.str(rbuf); !ok || len(rbuf) == 0 {
				return malformed("bad or empty reason string")
			}
		}
		if !s.lit("}") {
			return malformed("want }")
		}
		// Strings are made only where they are kept: identity values as
		// map keys; a CIDR is parsed from a transient copy.
		cur.value = string(vbuf)
		if cur.value == "" {
			return invalid(errors.New("empty value"))
		}
		if err := checkText("value", cur.value, MaxValueBytes); err != nil {
			return invalid(err)
		}
		ri, reason, isNew := bl.reason(cur.kind, rbuf)
		if isNew && len(rbuf) > 0 {
			if err := checkText("reason", reason, MaxReasonBytes); err != nil {
				return invalid(err)
			}
		}
		// Lists hold few distinct expiries: the last one is reused (parsing
		// one costs ~80 ns, a tenth of a CIDR entry's decoding).
		if len(lastExp) > 0 && bytes.Equal(exp, lastExp) {
			cur.exp = lastExpAt
		} else if cur.exp, ok = parseExpiry(exp); !ok {
			return invalid(fmt.Errorf("expires_at %q is not a UTC time like %s", exp, timeLayout))
		} else {
			lastExp, lastExpAt = exp, cur.exp
		}
		if cur.kind == KindCIDR {
			p, err := parseCIDR(cur.value)
			if err != nil {
				return invalid(err)
			}
			if cbuf = p.AppendTo(cbuf[:0]); !bytes.Equal(cbuf, vbuf) {
				return invalid(fmt.Errorf("not in canonical form %s", p))
			}
			cur.pfx = p
		}
		if bl.n > 0 && compareNorm(&prev, &cur) >= 0 {
			return invalid(fmt.Errorf("not after %s %q: entries must be sorted, without duplicates", prev.kind, prev.value))
		}
		bl.add(&cur, ri)
		if fn != nil && cur.kind == KindCIDR {
			fn(cur.pfx, cur.exp)
		}
		prev = cur
	}
	if !s.lit("}") || s.i != len(s.b) {
		return malformed("want }, then the end of the list")
	}
	if cc != nil && !cc.done() {
		return malformed("the blocks are not cut where the rule puts cuts (not the canonical encoding)")
	}
	return bl.finish(), nil
}

// parseExpiry reads exactly "YYYY-MM-DDTHH:MM:SSZ", a real date in 1970..9999.
func parseExpiry(b []byte) (int64, bool) {
	if len(b) != 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != 'Z' {
		return 0, false
	}
	var f [6]int
	for i, r := range [6][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}} {
		for _, c := range b[r[0]:r[1]] {
			if c < '0' || c > '9' {
				return 0, false
			}
			f[i] = f[i]*10 + int(c-'0')
		}
	}
	if f[0] < 1970 || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return 0, false
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], 0, time.UTC)
	return t.Unix(), t.Day() == f[2]
}
