package bpf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// DenyLoad fills fresh deny tries with a whole new list while its producer
// is still reading it (the agent: while a deny file is decoded), so the
// kernel's fill of a million prefixes overlaps the decoding instead of
// following it. Nothing is live until Commit, which swaps the fresh tries
// in exactly as ReplaceDenyList's swap does; Abort (or a Commit that fails)
// frees them and leaves the tries in force as they were.
//
// Add is for one goroutine (the producer); Commit and Abort may be called
// from another once the producer is done. Each family is filled by its own
// goroutine, in the order the prefixes arrive.
type DenyLoad struct {
	f      *Filter
	start  time.Time
	v4     *famLoad[e4, [8]byte]
	v6     *famLoad[e6, [20]byte]
	inV6   bool // the producer has reached the IPv6 prefixes
	closed bool
	once   sync.Once
	err    error // from creating the tries
}

// loadChunk is how many prefixes go to the kernel in one batch update.
const loadChunk = 8192

// famLoad fills one family's fresh trie from a channel of prefix chunks.
type famLoad[E comparable, K any] struct {
	m     *ebpf.Map
	ch    chan []netip.Prefix
	done  chan struct{}
	ents  []E
	err   error         // the first failure; later chunks are drained unread
	spent time.Duration // in the kernel
}

// StartDenyLoad creates the fresh tries and their fill goroutines. Give it
// the whole list with Add, in ReplaceDenyList's preferred order (IPv4 then
// IPv6, each by address then length, without duplicates: a deny.List's
// CIDRs), then Commit or Abort.
func (f *Filter) StartDenyLoad() (*DenyLoad, error) {
	l := &DenyLoad{f: f, start: time.Now()}
	m4, err := ebpf.NewMap(f.innerSpec(f.objs.RtDeny4))
	if err != nil {
		return nil, fmt.Errorf("bpf: deny load: create IPv4 trie: %w", err)
	}
	m6, err := ebpf.NewMap(f.innerSpec(f.objs.RtDeny6))
	if err != nil {
		m4.Close()
		return nil, fmt.Errorf("bpf: deny load: create IPv6 trie: %w", err)
	}
	l.v4 = &famLoad[e4, [8]byte]{m: m4, ch: make(chan []netip.Prefix, 64), done: make(chan struct{})}
	l.v6 = &famLoad[e6, [20]byte]{m: m6, ch: make(chan []netip.Prefix, 64), done: make(chan struct{})}
	go l.v4.run(conv4, key4)
	var marks splitMarker
	go l.v6.run(func(out []e6, p netip.Prefix) ([]e6, error) { return conv6(&marks, out, p) }, key6)
	return l, nil
}

// DenyInstalled reports whether this process has installed (or adopted)
// deny tries. Until it has, a first list should go through ReplaceDenyList,
// which adopts pinned tries that already hold it (an agent restart).
func (f *Filter) DenyInstalled() bool {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	return f.deny4 != nil && f.deny6 != nil
}

// Add queues the next prefixes of the list; the load owns ps from now on.
// Prefixes must be masked and in the order StartDenyLoad names; a prefix
// out of order makes Commit fail (nothing is swapped in).
func (l *DenyLoad) Add(ps []netip.Prefix) {
	if l.closed || len(ps) == 0 {
		return
	}
	if !l.inV6 {
		i := slices.IndexFunc(ps, func(p netip.Prefix) bool { return !p.Addr().Is4() })
		if i < 0 {
			l.v4.ch <- ps
			return
		}
		if i > 0 {
			l.v4.ch <- ps[:i:i]
		}
		l.inV6, ps = true, ps[i:]
	}
	l.v6.ch <- ps
}

// finish closes the channels and waits for the fill goroutines.
func (l *DenyLoad) finish() {
	if !l.closed {
		l.closed = true
		close(l.v4.ch)
		close(l.v6.ch)
	}
	<-l.v4.done
	<-l.v6.done
}

// Abort frees the fresh tries; the live ones stay as they are. It is a
// no-op after Commit.
func (l *DenyLoad) Abort() {
	l.finish()
	l.once.Do(func() {
		l.v4.m.Close()
		l.v6.m.Close()
	})
}

// Commit waits for the fill, adds extra (prefixes not in the streamed list,
// any order: the agent's snapshot-only ones), then swaps the fresh tries
// in (IPv4 first, then IPv6, each in one update of its outer map-in-map
// slot), bumps the deny generation and records the list's hash, as
// ReplaceDenyList does. When the list equals the one in force nothing is
// swapped (Op "unchanged"). On any error the fresh tries are freed and the
// live ones stay.
//
// Stats: Fill is the kernel time the fill goroutines spent while the
// producer ran; Prepare the Go work after it; Maps the kernel work after
// it (the rest of the fill, the swap, the generation and the hash).
func (l *DenyLoad) Commit(extra []netip.Prefix) (st DenyStats, err error) {
	waitAt := time.Now()
	l.finish()
	swapped := false
	defer func() {
		if !swapped {
			l.Abort()
		}
	}()
	if l.v4.err != nil || l.v6.err != nil {
		return st, errors.Join(l.v4.err, l.v6.err)
	}
	st.Fill = l.v4.spent + l.v6.spent
	mapsAt := time.Now()
	st.Maps = mapsAt.Sub(waitAt)
	v4, v6 := l.v4.ents, l.v6.ents
	if len(extra) > 0 {
		p4, p6, err := denyEntriesSorted(extra)
		if err != nil {
			return st, err
		}
		v4 = mergeNew(v4, p4, cmp.Compare[uint64])
		if len(p6) > 0 {
			denies := make([]e6, 0, len(v6)+len(p6))
			for _, e := range v6 {
				if e.v == denyValue {
					denies = append(denies, e)
				}
			}
			v6 = withSplitMarks(mergeNew(denies, p6, cmp6))
		}
		if len(v4) > denyMax || len(v6) > denyMax {
			return st, fmt.Errorf("bpf: deny list has %d IPv4 and %d IPv6 entries; at most %d each", len(v4), len(v6), denyMax)
		}
		d4, d6 := diffSorted(l.v4.ents, v4, cmp.Compare[uint64], -1), diffSorted(l.v6.ents, v6, cmp6, -1)
		for _, x := range []error{writePlan(l.v4.m, d4, key4), writePlan(l.v6.m, d6, key6)} {
			if x != nil {
				return st, fmt.Errorf("bpf: deny load: extra prefixes: %w", x)
			}
		}
	}
	n6 := 0
	for _, e := range v6 {
		if e.v == denyValue {
			n6++
		}
	}
	sum := hashDeny(v4, v6)
	f := l.f
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.deny4 != nil && f.deny6 != nil && slices.Equal(f.deny4.ents, v4) && slices.Equal(f.deny6.ents, v6) {
		st.Op = "unchanged"
		return st, nil
	}
	st.Op, st.Put = "swap", len(v4)+len(v6)
	st.Prepare = time.Since(mapsAt)
	swapAt := time.Now()
	if err := f.objs.RtDenyh.Update(uint32(0), &rampartDenyh{}, ebpf.UpdateAny); err != nil {
		return st, fmt.Errorf("bpf: clear deny hash: %w", err)
	}
	if err := f.objs.RtDeny4.Put(uint32(0), l.v4.m); err != nil {
		return st, fmt.Errorf("bpf: swap IPv4 trie: %w", err)
	}
	// The IPv4 trie is live and f's now. A failed IPv6 swap leaves that
	// family as it was (as ReplaceDenyList's does) and the hash cleared, so
	// a restart loads in full.
	swapped = true
	l.once.Do(func() {})
	f.replaceTrie4(l.v4.m, v4)
	if err := f.objs.RtDeny6.Put(uint32(0), l.v6.m); err != nil {
		l.v6.m.Close()
		return st, fmt.Errorf("bpf: swap IPv6 trie: %w", err)
	}
	f.replaceTrie6(l.v6.m, v6)
	if err := f.bumpDenyGen(len(v4), n6); err != nil {
		return st, err
	}
	if err := f.writeDenyHash(sum); err != nil {
		return st, err
	}
	st.Maps += time.Since(swapAt)
	return st, nil
}

func (f *Filter) replaceTrie4(m *ebpf.Map, ents []e4) {
	if f.deny4 != nil {
		f.deny4.m.Close()
	}
	f.deny4 = &trie[e4]{m: m, ents: ents, ver: trieVersion.Add(1)}
}

func (f *Filter) replaceTrie6(m *ebpf.Map, ents []e6) {
	if f.deny6 != nil {
		f.deny6.m.Close()
	}
	f.deny6 = &trie[e6]{m: m, ents: ents, ver: trieVersion.Add(1)}
}

// mergeNew returns sorted es with the entries of sorted add that it lacks.
func mergeNew[E comparable](es, add []E, cmpf func(a, b E) int) []E {
	var put []E
	for _, x := range add {
		if _, found := slices.BinarySearchFunc(es, x, cmpf); !found {
			put = append(put, x)
		}
	}
	if len(put) == 0 {
		return es
	}
	out, _ := editSorted(es, put, nil, cmpf) // put holds only absent entries
	return out
}

// writePlan applies a diff to a trie that is not live (any order will do).
func writePlan[E any, K any](m *ebpf.Map, p *editPlan[E], key func(E) (K, uint8)) error {
	keys, vals := keysOf(p.put, key)
	if err := fillTrie(m, keys, vals); err != nil {
		return err
	}
	del, _ := keysOf(p.del, key)
	return deleteKeys(m, del)
}

// run converts and writes chunks until the channel closes.
func (l *famLoad[E, K]) run(conv func([]E, netip.Prefix) ([]E, error), key func(E) (K, uint8)) {
	defer close(l.done)
	keys := make([]K, 0, loadChunk)
	vals := make([]uint8, 0, loadChunk)
	flush := func() {
		if len(keys) == 0 || l.err != nil {
			return
		}
		t := time.Now()
		l.err = fillTrie(l.m, keys, vals)
		l.spent += time.Since(t)
		keys, vals = keys[:0], vals[:0]
	}
	for ps := range l.ch {
		for _, p := range ps {
			if l.err != nil {
				break
			}
			n := len(l.ents)
			if l.ents, l.err = conv(l.ents, p); l.err != nil {
				break
			}
			for _, e := range l.ents[n:] {
				k, v := key(e)
				keys, vals = append(keys, k), append(vals, v)
			}
			if len(keys) >= loadChunk {
				flush()
			}
		}
	}
	flush()
	if len(l.ents) > denyMax && l.err == nil {
		l.err = fmt.Errorf("bpf: deny load: %d entries in one family; at most %d", len(l.ents), denyMax)
	}
}

var errOrder = errors.New("not after the previous prefix (want IPv4 then IPv6, each by address then length, no duplicates)")

// conv4 appends an IPv4 prefix, checking the order.
func conv4(out []e4, p netip.Prefix) ([]e4, error) {
	a := p.Addr()
	if !p.IsValid() || !a.Is4() || p != p.Masked() {
		return out, fmt.Errorf("bpf: deny load: %v is not a masked IPv4 prefix", p)
	}
	b := a.As4()
	e := uint64(binary.BigEndian.Uint32(b[:]))<<8 | uint64(p.Bits())
	if n := len(out); n > 0 && out[n-1] >= e {
		return out, fmt.Errorf("bpf: deny load: %v: %w", p, errOrder)
	}
	return append(out, e), nil
}

// conv6 appends an IPv6 prefix (and its SPLIT mark), checking the order.
func conv6(s *splitMarker, out []e6, p netip.Prefix) ([]e6, error) {
	a := p.Addr()
	if !p.IsValid() || !a.Is6() || a.Is4In6() && p.Bits() >= 96 || a.Zone() != "" || p != p.Masked() {
		return out, fmt.Errorf("bpf: deny load: %v is not a masked IPv6 prefix", p)
	}
	b := a.As16()
	e := e6{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), uint8(p.Bits()), denyValue}
	if len(s.stack) > 0 && cmp6(s.stack[len(s.stack)-1], e) >= 0 {
		return out, fmt.Errorf("bpf: deny load: %v: %w", p, errOrder)
	}
	return s.add(out, e), nil
}
