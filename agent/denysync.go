package agent

import (
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
	d := mergeDeny(act.l4.Deny, list.CIDRs(now))
	union := time.Since(start)
	ds, err := f.ReplaceDenyListStats(d)
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
