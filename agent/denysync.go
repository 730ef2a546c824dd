package agent

import (
	"net/netip"
	"slices"
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

// syncDeny puts the snapshot's deny CIDRs ∪ the channel's unexpired ones in
// the maps, when its inputs changed or a channel entry expired.
func (a *Agent) syncDeny(f *bpf.Filter, act *activeSnap, st *syncState) error {
	var list *deny.List
	if a.deny != nil {
		list = a.deny.Current()
	}
	now := time.Now()
	in := st.denyFrom
	if st.haveDeny && in.snap == act.snap.Version && in.list == list && (in.expiry.IsZero() || now.Before(in.expiry)) {
		return nil
	}
	start := time.Now()
	var d []netip.Prefix
	var ds bpf.DenyStats
	var err error
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
	d = mergeDeny(act.l4.Deny, list.CIDRs(now))
	union := time.Since(start)
	ds, err = f.ReplaceDenyListStats(d)
	return a.denyDone(st, act, list, d, ds, union, now, err)
}

// denyDone records what a deny update did.
func (a *Agent) denyDone(st *syncState, act *activeSnap, list *deny.List, d []netip.Prefix, ds bpf.DenyStats,
	union time.Duration, now time.Time, err error) error {
	if err != nil {
		st.haveDeny = false
		return err
	}
	next, _ := list.NextCIDRExpiry(now)
	st.denyLast = denyApply{DenyStats: ds, union: union}
	if ds.Op != "unchanged" || !st.haveDeny {
		a.log.Info("agent: deny list in the maps", "op", ds.Op, "prefixes", len(d), "put", ds.Put, "deleted", ds.Delete,
			"union", union.Round(time.Millisecond), "prepare", ds.Prepare.Round(time.Millisecond),
			"maps", ds.Maps.Round(time.Millisecond), "sequence", list.Sequence())
		st.denyAt = now
	}
	st.haveDeny, st.deny, st.denySeq = true, d, list.Sequence()
	st.denyFrom = denyInputs{snap: act.snap.Version, list: list, expiry: next}
	return nil
}

// editUnion applies a channel change to the union (sorted): del leaves it
// unless the snapshot denies it too, add joins it unless already there.
// put and drop are what changed in the union.
func editUnion(union, snap, add, del []netip.Prefix) (out, put, drop []netip.Prefix) {
	for _, p := range del {
		if !slices.Contains(snap, p) {
			drop = append(drop, p)
		}
	}
	for _, p := range add {
		if _, found := slices.BinarySearchFunc(union, p, comparePrefix); !found {
			put = append(put, p)
		}
	}
	out = make([]netip.Prefix, 0, len(union)+len(put)-len(drop))
	i, a, d := 0, 0, 0
	for a < len(put) || d < len(drop) {
		isPut := d == len(drop) || a < len(put) && comparePrefix(put[a], drop[d]) < 0
		var x netip.Prefix
		if isPut {
			x = put[a]
		} else {
			x = drop[d]
		}
		j, found := slices.BinarySearchFunc(union[i:], x, comparePrefix)
		out, i = append(out, union[i:i+j]...), i+j
		if isPut {
			out = append(out, x)
			a++
		} else {
			if found {
				i++
			}
			d++
		}
	}
	return append(out, union[i:]...), put, drop
}
