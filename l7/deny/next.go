package deny

import (
	"bytes"
	"crypto/ed25519"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// ParseNext is Parse for a file that replaces prev: it verifies the file
// exactly as Parse does (size, framing, digest, signature), then, when most
// of the canonical list bytes are the same as prev's, decodes and validates
// only the records that differ and derives the index from prev's. The
// result, and the error for a bad file, are the same as Parse's: whenever
// the incremental path finds anything it does not accept (or more than
// a few thousand records differ), the whole list is decoded by Parse's
// decoder, which then reports the error.
//
// Records are compared in lockstep as raw bytes: a run of equal records is
// skipped by one memcmp, and at a difference only the two records there
// are decoded and compared in canonical order (added, removed or changed).
// Canonical bytes make equal bytes equal entries, and the skipped records
// were validated when prev was parsed; each decoded new record is checked
// against the record before it, so the order rule holds across the seams.
func ParseNext(prev *List, data []byte, pub ed25519.PublicKey) (*List, error) {
	return parse(prev, data, pub, nil)
}

// CIDRFunc is given a list's CIDR entries as ParseNextStream decodes the
// whole list: each prefix in CIDRs' order (IPv4 then IPv6, by address then
// length), with its expiry in unix seconds (live while now < expires).
type CIDRFunc func(p netip.Prefix, expires int64)

// ParseNextStream is ParseNext that, when it decodes the whole list (a
// first list, or one that differs from prev in many records), also gives
// each CIDR entry to fn while it decodes, so a consumer can start on a
// million prefixes before the last one is read: the agent fills fresh XDP
// tries this way. fn sees entries before the file is known to be good; it
// must keep what it builds unused until ParseNextStream returns a list
// (and drop it on an error). On the incremental path fn is not called: the
// list's CIDRChanges say what changed.
func ParseNextStream(prev *List, data []byte, pub ed25519.PublicKey, fn CIDRFunc) (*List, error) {
	return parse(prev, data, pub, fn)
}

const recStart = `{"kind":"`

// incrementalLimit bounds the records decoded by the incremental path
// before it gives up for a full decode.
func incrementalLimit(n int) int { return 4096 + n/64 }

type rec struct {
	n      norm
	end    int  // index after the record's '}'
	differ bool // for a matched pair: the records' bytes differ
}

type recBufs struct{ v, r, c []byte }

// decodeRec decodes the record at b[i:] with decodeList's rules.
func decodeRec(b []byte, i int, buf *recBufs) (rec, bool) {
	s := scanner{b: b, i: i}
	var r rec
	if !s.lit(`{"kind":`) {
		return r, false
	}
	k, ok := s.raw()
	ki := kindIndex(Kind(k))
	if !ok || ki < 0 {
		return r, false
	}
	r.n.kind = kinds[ki]
	if !s.lit(`,"value":`) {
		return r, false
	}
	if buf.v, ok = s.str(buf.v[:0]); !ok {
		return r, false
	}
	if !s.lit(`,"expires_at":`) {
		return r, false
	}
	exp, ok := s.raw()
	if !ok {
		return r, false
	}
	buf.r = buf.r[:0]
	if s.lit(`,"reason":`) {
		if buf.r, ok = s.str(buf.r); !ok || len(buf.r) == 0 {
			return r, false
		}
	}
	if !s.lit("}") {
		return r, false
	}
	r.n.value = string(buf.v)
	if r.n.value == "" || checkText("value", r.n.value, MaxValueBytes) != nil {
		return r, false
	}
	if len(buf.r) > 0 {
		r.n.reason = string(buf.r)
		if checkText("reason", r.n.reason, MaxReasonBytes) != nil {
			return r, false
		}
	}
	if r.n.exp, ok = parseExpiry(exp); !ok {
		return r, false
	}
	if r.n.kind == KindCIDR {
		p, err := parseCIDR(r.n.value)
		if err != nil {
			return r, false
		}
		if buf.c = p.AppendTo(buf.c[:0]); !bytes.Equal(buf.c, buf.v) {
			return r, false
		}
		r.n.pfx = p
	}
	r.end = s.i
	return r, true
}

// commonPrefix is the length of the longest common prefix of a and b,
// compared a block at a time (memequal), then byte by byte.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for step := 4096; i+step <= n && bytes.Equal(a[i:i+step], b[i:i+step]); {
		i += step
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// blockSkip lets the lockstep comparison jump over blocks: the old and new
// bodies' block tables, as verified by envelope.Open.
type blockSkip struct{ old, cur []envelope.Block }

// blockAt is the block of bs that holds offset off.
func blockAt(bs []envelope.Block, off int) (envelope.Block, bool) {
	i := sort.Search(len(bs), func(i int) bool { return bs[i].Offset+bs[i].Len > off })
	if i == len(bs) || bs[i].Offset > off {
		return envelope.Block{}, false
	}
	return bs[i], true
}

// common is commonPrefix(old[oi:], b[ni:]), except that a block of each
// starting at the same point of the run, with the same hash and length, is
// skipped without reading it: Open verified that both hash to that value.
func (s *blockSkip) common(old, b []byte, oi, ni int) int {
	if s == nil {
		return commonPrefix(old[oi:], b[ni:])
	}
	d := 0
	for {
		o, n := oi+d, ni+d
		bo, okO := blockAt(s.old, o)
		bn, okN := blockAt(s.cur, n)
		if !okO || !okN {
			return d + commonPrefix(old[o:], b[n:])
		}
		if bo.Offset == o && bn.Offset == n && bo.Len == bn.Len && bo.Hash == bn.Hash {
			d += bo.Len
			continue
		}
		m := min(bo.Offset+bo.Len-o, bn.Offset+bn.Len-n)
		k := commonPrefix(old[o:o+m], b[n:n+m])
		if d += k; k < m {
			return d
		}
	}
}

const head = `{"entries":[`

// newBlocksCut reports whether the blocks of b that prev does not have
// (prev's were checked when it was parsed) are cut where the rule says:
// a block is cut the same way wherever it stands, so a block equal to one
// of prev's is cut right. Records are decoded only far enough to find
// their ends; anything odd is left to the full decode to report.
func newBlocksCut(prev []envelope.Block, b []byte, cur []envelope.Block) bool {
	known := make(map[[32]byte]bool, len(prev))
	for _, p := range prev {
		known[p.Hash] = true
	}
	var buf recBufs
	for _, blk := range cur {
		if known[blk.Hash] {
			continue
		}
		i, end := blk.Offset, blk.Offset+blk.Len
		c := cutter{start: i}
		if i == 0 {
			i = len(head) // b starts with head (checked by the caller)
		}
		for {
			if i < len(b) && b[i] == ']' { // the end of the list
				if i+2 != end || end != len(b) {
					return false
				}
				break
			}
			r, ok := decodeRec(b, i, &buf)
			if !ok || r.end >= end {
				return false
			}
			if b[r.end] != ',' {
				if b[r.end] != ']' || r.end+2 != end || end != len(b) {
					return false
				}
				break
			}
			fire := c.after(b[i:r.end], r.end+1)
			if r.end+1 == end {
				if !fire || end == len(b) {
					return false
				}
				break
			}
			if fire {
				return false
			}
			i = r.end + 1
		}
	}
	return true
}

// decodeNext derives the list for new list bytes b from prev, or returns
// nil when prev has no bytes, the difference is large, or anything is
// wrong (the caller decodes b in full, which reports the error). blocks,
// when prev has a block table too, are b's (both verified): the blocks
// b shares with prev are skipped, and the new ones must be cut by the rule.
func decodeNext(prev *List, b []byte, blocks []envelope.Block) *List {
	old := prev.raw
	if old == nil || !bytes.HasPrefix(b, []byte(head)) || !bytes.HasSuffix(b, []byte("]}")) {
		return nil
	}
	var skip *blockSkip
	if blocks != nil && prev.opened != nil {
		skip = &blockSkip{old: prev.opened.Blocks(), cur: blocks}
		if !newBlocksCut(skip.old, b, blocks) {
			return nil
		}
	}
	limit := incrementalLimit(prev.Len())
	var buf recBufs
	var dels, adds []norm
	var pred norm     // the last new record decoded
	havePred := false // else predSkip, if >= 0, starts the record before
	predSkip := -1
	var oc, nc *rec
	oi, ni := len(head), len(head)
	// next moves past a record's end: a ',' then another record, or the
	// closing "]}" at the very end.
	next := func(s []byte, e int) (int, bool) {
		switch {
		case e+1 < len(s) && s[e] == ',' && s[e+1] == '{':
			return e + 1, true
		case e+2 == len(s) && s[e] == ']' && s[e+1] == '}':
			return e, true
		}
		return 0, false
	}
	for {
		if oc == nil && nc == nil {
			d := skip.common(old, b, oi, ni)
			if oi+d == len(old) && ni+d == len(b) {
				break // the rest is the same
			}
			if r := bytes.LastIndex(old[oi:oi+d], []byte(recStart)); r > 0 {
				// records [oi, oi+r) are the same in both
				last := bytes.LastIndex(old[oi:oi+r-1], []byte(recStart))
				predSkip, havePred = ni+last, false
				oi, ni = oi+r, ni+r
			}
		}
		if oi >= len(old) || ni >= len(b) {
			return nil
		}
		endO, endN := old[oi] == ']', b[ni] == ']'
		if endN && ni+2 != len(b) {
			return nil
		}
		if endO && endN {
			return nil // tails differ but both end: b is not "]}"-terminated canonically
		}
		if oc == nil && !endO {
			r, ok := decodeRec(old, oi, &buf)
			if !ok {
				return nil
			}
			oc = &r
		}
		if nc == nil && !endN {
			r, ok := decodeRec(b, ni, &buf)
			if !ok {
				return nil
			}
			if !havePred && predSkip >= 0 {
				p, ok := decodeRec(b, predSkip, &buf)
				if !ok {
					return nil
				}
				pred, havePred = p.n, true
			}
			if havePred && compareNorm(&pred, &r.n) >= 0 {
				return nil
			}
			pred, havePred = r.n, true
			nc = &r
		}
		c := 0
		switch {
		case endO:
			c = 1
		case endN:
			c = -1
		default:
			c = compareNorm(&oc.n, &nc.n)
		}
		if c == 0 && !bytes.Equal(old[oi:oc.end], b[ni:nc.end]) {
			dels, adds = append(dels, oc.n), append(adds, nc.n) // changed expiry or reason
		} else if c < 0 {
			dels = append(dels, oc.n)
		} else if c > 0 {
			adds = append(adds, nc.n)
		}
		var ok bool
		if c <= 0 {
			if oi, ok = next(old, oc.end); !ok {
				return nil
			}
			oc = nil
		}
		if c >= 0 {
			if ni, ok = next(b, nc.end); !ok {
				return nil
			}
			nc = nil
		}
		if len(dels)+len(adds) > limit {
			return nil
		}
	}
	if prev.Len()-len(dels)+len(adds) > MaxEntries {
		return nil
	}
	return prev.edit(dels, adds)
}

// edit returns prev without dels and with adds (both in canonical order; a
// changed entry is in both).
func (prev *List) edit(dels, adds []norm) *List {
	l := &List{counts: prev.counts, ids: prev.ids, reasons: slices.Clip(prev.reasons),
		base: &baseID{prev.seq, prev.digest}}
	intern := make(map[string]int32, len(prev.reasons))
	for i, r := range prev.reasons {
		intern[r] = int32(i)
	}
	reasonOf := func(n *norm) int32 {
		text := n.reason
		if text == "" {
			text = string(n.kind)
		}
		if i, ok := intern[text]; ok {
			return i
		}
		i := int32(len(l.reasons))
		l.reasons = append(l.reasons, text)
		intern[text] = i
		return i
	}
	cloned := [4]bool{}
	var ev4, ev6 []event
	for _, set := range []struct {
		ns  []norm
		add bool
	}{{dels, false}, {adds, true}} {
		for i := range set.ns {
			n := &set.ns[i]
			ki := kindIndex(n.kind)
			if set.add {
				l.counts[ki]++
			} else {
				l.counts[ki]--
			}
			if n.kind == KindCIDR {
				e := event{key: keyOf(n.pfx.Addr()), bits: uint8(n.pfx.Bits()), add: set.add}
				if set.add {
					e.exp, e.reason = n.exp, reasonOf(n)
					l.cidrAdd = append(l.cidrAdd, cidrEntry{n.pfx, n.exp})
				} else {
					l.cidrDel = append(l.cidrDel, cidrEntry{n.pfx, n.exp})
				}
				if n.pfx.Addr().Is4() {
					ev4 = append(ev4, e)
				} else {
					ev6 = append(ev6, e)
				}
				continue
			}
			if !cloned[ki] {
				l.ids[ki], cloned[ki] = maps.Clone(prev.ids[ki]), true
			}
			if set.add {
				l.ids[ki][n.value] = ref{exp: n.exp, reason: reasonOf(n)}
			} else {
				delete(l.ids[ki], n.value)
			}
		}
	}
	l.v4 = prev.v4.edit(ev4)
	l.v6 = prev.v6.edit(ev6)
	return l
}

type event struct {
	key    u128
	bits   uint8
	add    bool
	exp    int64
	reason int32
}

func cmpKey(k u128, bits uint8, k2 u128, bits2 uint8) int {
	switch {
	case k.less(k2):
		return -1
	case k2.less(k):
		return 1
	}
	return int(bits) - int(bits2)
}

// edit returns s with the events applied: block copies between them, then
// parents and the top-bits table rebuilt. Unchanged sets are shared.
func (s *prefixSet) edit(ev []event) prefixSet {
	if len(ev) == 0 {
		return *s
	}
	// deletes before adds of the same prefix (a changed entry)
	slices.SortStableFunc(ev, func(a, b event) int {
		if c := cmpKey(a.key, a.bits, b.key, b.bits); c != 0 {
			return c
		}
		if a.add == b.add {
			return 0
		}
		if a.add {
			return 1
		}
		return -1
	})
	adds := 0
	for _, e := range ev {
		if e.add {
			adds++
		}
	}
	n := len(s.keys) - (len(ev) - adds) + adds
	out := prefixSet{keys: make([]u128, 0, n), meta: make([]pmeta, 0, n)}
	var segs []segment // the runs of s copied between events
	starts := make([]int, 0, len(ev))
	i := 0
	for _, e := range ev {
		j := i + sortSearch(len(s.keys)-i, func(x int) bool {
			return cmpKey(s.keys[i+x], s.meta[i+x].bits, e.key, e.bits) >= 0
		})
		segs = append(segs, segment{lo: i, hi: j, shift: len(out.keys) - i})
		out.keys, out.meta = append(out.keys, s.keys[i:j]...), append(out.meta, s.meta[i:j]...)
		i = j
		starts = append(starts, len(out.keys)) // the added prefix, or what follows the deleted one
		if e.add {
			out.keys = append(out.keys, e.key)
			out.meta = append(out.meta, pmeta{exp: e.exp, reason: e.reason, bits: e.bits})
		} else if i < len(s.keys) {
			i++ // the deleted prefix (decoded from prev's bytes, so present)
		}
	}
	segs = append(segs, segment{lo: i, hi: len(s.keys), shift: len(out.keys) - i})
	out.keys, out.meta = append(out.keys, s.keys[i:]...), append(out.meta, s.meta[i:]...)
	out.relink(s, ev, segs, starts)
	return out
}

// segment is a run s[lo:hi] of an edited set's entries, moved by shift.
type segment struct{ lo, hi, shift int }

// relink gives an edited set the parent links and top-bits table finish
// would, from s's (the set before the edit) instead of from scratch: a
// kept prefix that no added or deleted prefix contains has the same parent
// as before, moved with its segment; the prefixes an event contains (a
// run right after its place) and the added ones are linked again by
// walking up from their predecessor, in order. The table moves by the
// events' counts. For a million prefixes and two events, prefixSet.edit
// went from 19 to 9 ms of CPU (finish alone was ~10 ms), ParseNext from 33
// to 26 ms (pprof of `go test -run '^$' -bench 'ParseNext1M/ParseNext$'
// -benchtime 20x -cpuprofile` in l7/deny, focus deny.ParseNext$, load 8.6).
func (out *prefixSet) relink(s *prefixSet, ev []event, segs []segment, starts []int) {
	if len(out.keys) == 0 || len(s.first) == 0 {
		*out = prefixSet{keys: out.keys, meta: out.meta}
		out.finish()
		return
	}
	for k := 1; k < len(segs); k++ { // the first segment has not moved, nor have its parents
		sg := segs[k]
		for x := sg.lo + sg.shift; x < sg.hi+sg.shift; x++ {
			p := int(out.meta[x].parent)
			switch {
			case p < 0:
			case p >= sg.lo:
				out.meta[x].parent = int32(p + sg.shift)
			default:
				m := sort.Search(k, func(m int) bool { return segs[m].hi > p })
				if m < k && segs[m].lo <= p {
					out.meta[x].parent = int32(p + segs[m].shift)
				} else {
					out.meta[x].parent = -1 // p was deleted: x is in its run, linked below
				}
			}
		}
	}
	for i, e := range ev {
		for x := starts[i]; x < len(out.keys); x++ {
			if x > starts[i] || !e.add { // past the event's own place: its run
				if !contains(e.key, e.bits, out.keys[x]) {
					break
				}
			}
			c := int32(x - 1)
			for c >= 0 && !contains(out.keys[c], out.meta[c].bits, out.keys[x]) {
				c = out.meta[c].parent
			}
			out.meta[x].parent = c
		}
	}
	out.first = make([]int32, len(s.first))
	d, e := 0, 0 // d: adds minus deletes among ev[:e], the events below the table's slot
	for b := range out.first {
		for e < len(ev) && int(ev[e].key.hi>>48) < b {
			if ev[e].add {
				d++
			} else {
				d--
			}
			e++
		}
		out.first[b] = s.first[b] + int32(d)
	}
}

func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// CIDRChanges says how CIDRs(now) differs from from.CIDRs(now), when l was
// derived from from by ParseNext's incremental path (ok false otherwise):
// the prefixes to add and to remove, each in CIDRs' order. A changed entry
// counts only if it starts or stops being live at now.
func (l *List) CIDRChanges(from *List, now time.Time) (add, del []netip.Prefix, ok bool) {
	if l == nil || from == nil || l.base == nil || l.base.seq != from.seq || l.base.digest != from.digest {
		return nil, nil, false
	}
	t := now.Unix()
	live := func(es []cidrEntry) []netip.Prefix {
		var out []netip.Prefix
		for _, e := range es {
			if t < e.exp {
				out = append(out, e.pfx)
			}
		}
		return out
	}
	a, d := live(l.cidrAdd), live(l.cidrDel)
	i, j := 0, 0
	for i < len(a) && j < len(d) { // drop prefixes live in both
		switch c := comparePfx(a[i], d[j]); {
		case c < 0:
			add = append(add, a[i])
			i++
		case c > 0:
			del = append(del, d[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return append(add, a[i:]...), append(del, d[j:]...), true
}

func comparePfx(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
