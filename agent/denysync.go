package agent

import (
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// denyInputs identify what the deny union was computed from: while they
// are the same and no CIDR has expired since, the union is not recomputed
// (a pass with nothing changed costs nothing, even for a million prefixes).
type denyInputs struct {
	snap   snapshot.Version
	list   *deny.List
	expiry time.Time // next CIDR expiry of list (zero: none)
}

// denyApply is what the last recomputation did.
type denyApply struct {
	bpf.DenyStats
	union time.Duration
}

// denyStage is a whole new channel list whose live CIDRs went into fresh
// tries while the watcher decoded it (bpf.DenyLoad), waiting for the next
// sync pass to swap them in (with the snapshot's prefixes) or drop them.
type denyStage struct {
	list  *deny.List
	load  *bpf.DenyLoad
	cidrs []netip.Prefix // list.CIDRs(at)
	at    time.Time
}

// denyStager holds at most one stage; a newer one replaces (and frees) it.
type denyStager struct {
	mu sync.Mutex
	s  *denyStage
}

func (g *denyStager) put(s *denyStage) {
	g.mu.Lock()
	old := g.s
	g.s = s
	g.mu.Unlock()
	if old != nil {
		old.load.Abort()
	}
}

func (g *denyStager) take() *denyStage {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.s
	g.s = nil
	return s
}

// denyStreamChunk is how many prefixes the stream hands the load at once.
const denyStreamChunk = 16384

// denyStream collects the live CIDRs of a list being decoded and feeds
// them to a DenyLoad, started at the first one.
type denyStream struct {
	f    *bpf.Filter
	at   time.Time
	now  int64 // at, in unix seconds
	load *bpf.DenyLoad
	err  error // from starting the load; then nothing is streamed
	size int   // the capacity all gets, at the first prefix
	all  []netip.Prefix
	sent int
}

func (s *denyStream) add(p netip.Prefix, exp int64) {
	if s.err != nil || exp <= s.now {
		return
	}
	if s.load == nil {
		if s.load, s.err = s.f.StartDenyLoad(); s.err != nil {
			return
		}
		// Made here, not before the parse: a small change takes the
		// incremental path and streams nothing, and a fresh 32 MB of
		// netip.Prefix (zeroed, and holding pointers for the collector to
		// scan) was ~5 ms of its CPU and most of its garbage
		// (BenchmarkDenyApply1M/change2-steady, pprof, 06:40 UTC).
		s.all = make([]netip.Prefix, 0, s.size)
	}
	if s.all = append(s.all, p); len(s.all)-s.sent >= denyStreamChunk {
		s.flush()
	}
}

func (s *denyStream) flush() {
	if n := len(s.all); n > s.sent {
		s.load.Add(s.all[s.sent:n:n])
		s.sent = n
	}
}

// parseDeny is the deny watcher's parser. Once this process has deny tries
// in the kernel, a file decoded in full (a new list rather than a few
// changes) has its live CIDRs streamed into fresh tries while it is
// decoded, so the kernel fill overlaps the decoding; the tries are staged
// for the sync pass, which swaps them in only for the list then in force.
// A bad file frees them: the old tries stay.
func (a *Agent) parseDeny(prev *deny.List, data []byte) (*deny.List, error) {
	f := a.filter()
	if f == nil || !f.DenyInstalled() { // a first load may adopt pinned tries instead
		return deny.ParseNext(prev, data, a.c.PublicKey)
	}
	s := &denyStream{f: f, at: time.Now(), size: prev.Count(deny.KindCIDR) + 1024}
	s.now = s.at.Unix()
	l, err := deny.ParseNextStream(prev, data, a.c.PublicKey, s.add)
	if s.err != nil {
		a.log.Warn("agent: deny list not streamed into the maps; it is loaded after the parse", "err", s.err)
	}
	if s.load == nil {
		return l, err
	}
	s.flush()
	if err != nil {
		s.load.Abort()
		return nil, err
	}
	a.denyStage.put(&denyStage{list: l, load: s.load, cidrs: s.all, at: s.at})
	return l, nil
}

// syncDeny puts the snapshot's deny CIDRs ∪ the channel's unexpired ones in
// the maps, when its inputs changed or a channel entry expired.
func (a *Agent) syncDeny(f *bpf.Filter, act *activeSnap, st *syncState) error {
	var list *deny.List
	if a.deny != nil {
		list = a.deny.Current()
	}
	now := time.Now()
	stage := a.denyStage.take()
	if stage != nil && stage.list != list {
		stage.load.Abort() // refused after parsing (stale), or superseded
		stage = nil
	}
	in := st.denyFrom
	if stage == nil && st.haveDeny && in.snap == act.snap.Version && in.list == list && (in.expiry.IsZero() || now.Before(in.expiry)) {
		return nil
	}
	start := time.Now()
	var d []netip.Prefix
	var ds bpf.DenyStats
	var err error
	// The list in force was streamed into fresh tries while it was decoded:
	// add the snapshot's prefixes and swap them in, unless a channel CIDR
	// expired in between (then the stream is stale: the full path).
	if stage != nil {
		if next, ok := list.NextCIDRExpiry(stage.at); !ok || now.Before(next) {
			extra := snapExtra(act.l4.Deny, stage.cidrs)
			union := time.Since(start)
			ds, err = stage.load.Commit(extra)
			d = unionInsert(stage.cidrs, extra) // after Commit: the load has stopped reading stage.cidrs
			return a.denyDone(st, act, list, d, ds, union, now, err)
		}
		stage.load.Abort()
	}
	// A list derived from the one in the maps by a few changes (and no
	// channel CIDR expired since): edit the union and the maps by those.
	add, del, ok := list.CIDRChanges(in.list, now)
	if ok && st.haveDeny && in.snap == act.snap.Version && (in.expiry.IsZero() || now.Before(in.expiry)) {
		var put, drop []netip.Prefix
		d, put, drop = editUnion(st.deny, act.l4.Deny, add, del)
		union := time.Since(start)
		ds, err = f.EditDenyList(d, put, drop)
		return a.denyDone(st, act, list, d, ds, union, now, err)
	}
	ch := list.AppendCIDRs(make([]netip.Prefix, 0, unionCap(list.Count(deny.KindCIDR)+len(act.l4.Deny))), now)
	d = unionInsert(ch, snapExtra(act.l4.Deny, ch))
	union := time.Since(start)
	ds, err = f.ReplaceDenyListStats(d)
	return a.denyDone(st, act, list, d, ds, union, now, err)
}

// denyDone records what a deny update did.
func (a *Agent) denyDone(st *syncState, act *activeSnap, list *deny.List, d []netip.Prefix, ds bpf.DenyStats,
	union time.Duration, now time.Time, err error) error {
	st.deny, st.denyV4 = d, countV4(d) // an edit changed the union in place: st.deny is d even on failure
	if err != nil {
		st.haveDeny = false // the next pass loads the list in full
		return err
	}
	next, _ := list.NextCIDRExpiry(now)
	st.denyLast = denyApply{DenyStats: ds, union: union}
	if ds.Op != "unchanged" || !st.haveDeny {
		a.log.Info("agent: deny list in the maps", "op", ds.Op, "prefixes", len(d), "put", ds.Put, "deleted", ds.Delete,
			"union", union.Round(time.Millisecond), "prepare", ds.Prepare.Round(time.Millisecond),
			"maps", ds.Maps.Round(time.Millisecond), "fill_while_parsing", ds.Fill.Round(time.Millisecond),
			"sequence", list.Sequence())
		st.denyAt = now
	}
	st.haveDeny, st.denySeq = true, list.Sequence()
	st.denyFrom = denyInputs{snap: act.snap.Version, list: list, expiry: next}
	return nil
}

// The union (snapshot prefixes ∪ the channel's live CIDRs, sorted) is the
// syncer's own: every path builds it in a buffer nothing else holds (the
// full path in a fresh one, the streamed path in the stream's, which the
// load is done with at Commit), and a few changes edit it in place, with
// block moves, instead of copying it whole. For a million prefixes (32 MB,
// netip.Prefix holds a pointer, so a fresh copy is zeroed, and scanned by
// every GC cycle) a copy cost 25–60 ms of the 2-entry change
// (BenchmarkDenyApply1M/change2, union-ms); the in-place edit moves at
// most the tail after the first change. Readers elsewhere see only its
// length and st.denyV4 (admin, status), never its elements.

// countV4 is how many of u (sorted: IPv4 first) are IPv4.
func countV4(u []netip.Prefix) int {
	return sort.Search(len(u), func(i int) bool { return !u[i].Addr().Is4() })
}

// unionCap is the capacity for a union of n prefixes: room for changes, so
// an edit after a full load grows it in place.
func unionCap(n int) int { return n + n/64 + 1024 }

// snapExtra is the snapshot's prefixes that are not in u (sorted), sorted
// and without duplicates.
func snapExtra(snap, u []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range snap {
		if _, found := slices.BinarySearchFunc(u, p, comparePrefix); !found {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

// editUnion applies a channel change to the union (sorted, the syncer's
// own: it is edited in place): del leaves it unless the snapshot denies it
// too, add joins it unless already there. put and drop are what changed in
// the union.
func editUnion(union, snap, add, del []netip.Prefix) (out, put, drop []netip.Prefix) {
	for _, p := range del {
		if _, found := slices.BinarySearchFunc(union, p, comparePrefix); found && !slices.Contains(snap, p) {
			drop = append(drop, p)
		}
	}
	for _, p := range add {
		if _, found := slices.BinarySearchFunc(union, p, comparePrefix); !found {
			put = append(put, p)
		}
	}
	return unionInsert(unionRemove(union, drop), put), put, drop
}

// unionRemove takes ps (sorted, each in u) out of u (sorted), in place.
func unionRemove(u, ps []netip.Prefix) []netip.Prefix {
	if len(ps) == 0 {
		return u
	}
	w, from := -1, 0 // u[:w] is done; u[from:] is still to keep
	for _, p := range ps {
		j, found := slices.BinarySearchFunc(u[from:], p, comparePrefix)
		if !found {
			continue
		}
		j += from
		if w < 0 {
			w = j
		} else {
			w += copy(u[w:], u[from:j])
		}
		from = j + 1
	}
	if w < 0 {
		return u
	}
	w += copy(u[w:], u[from:])
	clear(u[w:])
	return u[:w]
}

// unionInsert puts ps (sorted, none in u) into u (sorted): in place from the
// back when u has room, else into a new buffer with room to spare.
func unionInsert(u, ps []netip.Prefix) []netip.Prefix {
	if len(ps) == 0 {
		return u
	}
	n, k := len(u), len(ps)
	if n+k > cap(u) {
		nu := make([]netip.Prefix, n, unionCap(n+k))
		copy(nu, u)
		u = nu
	}
	u = u[:n+k]
	end := n // u[:end] holds the prefixes not yet moved
	for i := k - 1; i >= 0; i-- {
		j, _ := slices.BinarySearchFunc(u[:end], ps[i], comparePrefix)
		copy(u[j+i+1:], u[j:end])
		u[j+i] = ps[i]
		end = j
	}
	return u
}
