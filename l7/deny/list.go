package deny

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// List is a verified, indexed deny list. It is immutable: share it freely.
// The zero List (and a nil *List) denies nothing.
type List struct {
	seq     uint64
	created time.Time
	digest  [32]byte
	keyID   string
	counts  [5]int            // by kindIndex
	ids     [4]map[string]ref // api_key_id, jti, subject, tenant
	v4, v6  prefixSet         // IPv4 keys sit in the top 32 bits
	reasons []string          // interned; an entry with none says its kind
	raw     []byte            // the canonical list bytes (the body), for ParseNext
	opened  *envelope.Opened  // the file's envelope, for ParseNext's Open
	// From ParseNext's incremental path: the list this one was derived
	// from, and the CIDR entries removed and added (a changed one in both).
	base             *baseID
	cidrDel, cidrAdd []cidrEntry
}

type baseID struct {
	seq    uint64
	digest [32]byte
}

type cidrEntry struct {
	pfx netip.Prefix
	exp int64
}

type ref struct {
	exp    int64 // unix seconds; matches while now < exp
	reason int32
}

// Query is what a request is checked against; empty fields and an invalid
// IP are skipped.
type Query struct {
	KeyID, JTI, Subject, Tenant string
	IP                          netip.Addr
}

var emptyList = &List{}

// Sequence is the list's sequence number (0 for the empty list).
func (l *List) Sequence() uint64 {
	if l == nil {
		return 0
	}
	return l.seq
}

// Len is the number of entries, expired ones included.
func (l *List) Len() int {
	if l == nil {
		return 0
	}
	n := 0
	for _, c := range l.counts {
		n += c
	}
	return n
}

// Count is the number of entries of one kind, expired ones included.
func (l *List) Count(k Kind) int {
	if i := kindIndex(k); l != nil && i >= 0 {
		return l.counts[i]
	}
	return 0
}

// CreatedAt is when the list was built.
func (l *List) CreatedAt() time.Time { return l.created }

// KeyID names the key that signed the list.
func (l *List) KeyID() string { return l.keyID }

// DigestHex is the digest of the file's block table (which the signature
// covers and which fixes every byte of the list), in hex.
func (l *List) DigestHex() string { return hex.EncodeToString(l.digest[:]) }

// CheckIP reports whether ip lies in an unexpired CIDR entry, with the
// reason of the longest such prefix ("cidr" if it has none). IPv4-mapped
// IPv6 addresses are unmapped first; zones are ignored.
func (l *List) CheckIP(ip netip.Addr, now time.Time) (reason string, denied bool) {
	if l == nil || !ip.IsValid() {
		return "", false
	}
	return l.checkIP(ip, now.Unix())
}

func (l *List) checkIP(ip netip.Addr, now int64) (string, bool) {
	ip = ip.Unmap()
	set := &l.v6
	if ip.Is4() {
		set = &l.v4
	}
	if r, ok := set.lookup(keyOf(ip), now); ok {
		return l.reasons[r], true
	}
	return "", false
}

// Check reports whether any part of q is denied by an unexpired entry,
// trying the IP first (as CheckIP), then the API key id, jti, subject and
// tenant; reason is the matching entry's, or its kind if it has none.
func (l *List) Check(q Query, now time.Time) (reason string, denied bool) {
	if l == nil {
		return "", false
	}
	t := now.Unix()
	if q.IP.IsValid() {
		if r, ok := l.checkIP(q.IP, t); ok {
			return r, true
		}
	}
	for i, v := range [4]string{q.KeyID, q.JTI, q.Subject, q.Tenant} {
		if v == "" {
			continue
		}
		if e, ok := l.ids[i][v]; ok && t < e.exp {
			return l.reasons[e.reason], true
		}
	}
	return "", false
}

// CIDRs returns the unexpired CIDR entries, IPv4 first, each family in
// address order (nested prefixes included), for mirroring into XDP.
func (l *List) CIDRs(now time.Time) []netip.Prefix {
	if l == nil {
		return nil
	}
	return l.AppendCIDRs(make([]netip.Prefix, 0, l.counts[kindIndex(KindCIDR)]), now)
}

// AppendCIDRs appends CIDRs(now) to dst, so a caller can choose the
// buffer (the agent sizes its union with room for later edits).
func (l *List) AppendCIDRs(dst []netip.Prefix, now time.Time) []netip.Prefix {
	if l == nil {
		return dst
	}
	t := now.Unix()
	dst = l.v4.appendLive(dst, true, t)
	return l.v6.appendLive(dst, false, t)
}

// NextCIDRExpiry is the earliest expiry of a CIDR entry after now, i.e.
// when CIDRs(now) next changes; ok is false when it never does. It scans the
// prefixes (about a millisecond for a million), so callers can skip
// recomputing CIDRs until then.
func (l *List) NextCIDRExpiry(now time.Time) (next time.Time, ok bool) {
	if l == nil {
		return time.Time{}, false
	}
	t, best := now.Unix(), int64(0)
	for _, s := range [2]*prefixSet{&l.v4, &l.v6} {
		for i := range s.meta {
			if e := s.meta[i].exp; e > t && (best == 0 || e < best) {
				best = e
			}
		}
	}
	if best == 0 {
		return time.Time{}, false
	}
	return time.Unix(best, 0), true
}

// builder indexes entries as decodeList reads them, in canonical order.
type builder struct {
	l      *List
	n      int
	intern map[string]int32
}

// init sizes the index for the list bytes, counted ahead: in the canonical
// encoding a quote inside a string is escaped, so every `{"kind":"` starts
// an entry.
func (b *builder) init(list []byte) {
	var n [5]int
	var v4 int
	const start = `{"kind":"`
	for rest := list; ; {
		i := bytes.Index(rest, []byte(start))
		if i < 0 {
			break
		}
		rest = rest[i+len(start):]
		for k, kind := range kinds {
			if bytes.HasPrefix(rest, []byte(kind)) && len(rest) > len(kind) && rest[len(kind)] == '"' {
				n[k]++
				if kind == KindCIDR && isV4(rest[len(kind):]) {
					v4++
				}
				break
			}
		}
	}
	b.l = &List{}
	b.intern = map[string]int32{}
	for i := range b.l.ids {
		b.l.ids[i] = make(map[string]ref, min(n[i], MaxEntries))
	}
	cidrs := min(n[kindIndex(KindCIDR)], MaxEntries)
	v4 = min(v4, cidrs)
	b.l.v4.keys, b.l.v4.meta = make([]u128, 0, v4), make([]pmeta, 0, v4)
	b.l.v6.keys, b.l.v6.meta = make([]u128, 0, cidrs-v4), make([]pmeta, 0, cidrs-v4)
}

// isV4 reads `","value":"` and a value up to its '/': IPv4 has no ':'.
func isV4(b []byte) bool {
	const v = `","value":"`
	if !bytes.HasPrefix(b, []byte(v)) {
		return false
	}
	for _, c := range b[len(v):min(len(b), len(v)+48)] {
		switch c {
		case ':':
			return false
		case '/':
			return true
		}
	}
	return false
}

// reason interns an entry's reason (its kind's name when empty).
func (b *builder) reason(k Kind, r []byte) (idx int32, text string, isNew bool) {
	var ok bool
	if len(r) == 0 {
		idx, ok = b.intern[string(k)]
	} else {
		idx, ok = b.intern[string(r)]
	}
	if ok {
		return idx, b.l.reasons[idx], false
	}
	text = string(k)
	if len(r) > 0 {
		text = string(r)
	}
	idx = int32(len(b.l.reasons))
	b.l.reasons = append(b.l.reasons, text)
	b.intern[text] = idx
	return idx, text, true
}

func (b *builder) add(n *norm, reason int32) {
	ki := kindIndex(n.kind)
	b.l.counts[ki]++
	b.n++
	if n.kind != KindCIDR {
		b.l.ids[ki][n.value] = ref{exp: n.exp, reason: reason}
		return
	}
	set := &b.l.v6
	if n.pfx.Addr().Is4() {
		set = &b.l.v4
	}
	set.keys = append(set.keys, keyOf(n.pfx.Addr()))
	set.meta = append(set.meta, pmeta{exp: n.exp, reason: reason, bits: uint8(n.pfx.Bits())})
}

func (b *builder) finish() *List {
	b.l.v4.finish()
	b.l.v6.finish()
	return b.l
}
