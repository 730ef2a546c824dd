package agent

import (
	"crypto/ed25519"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/bpf/netnstest"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// TestDenyIncremental: a channel list changed in a few places (adds and
// removals spread over it, one removed prefix the snapshot also denies,
// one added that it already denies) is read by the watcher holding the
// previous list and applied as an edit of the union and the maps: the
// counts are the change, and the union is what a full recomputation gives.
// Trie entries are counted (all changes here are IPv4: no SPLIT marks).
func TestDenyIncremental(t *testing.T) {
	needRoot(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	exp := time.Now().Add(24 * time.Hour)
	snapDeny := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")}
	base := denyEntries(1, 20_000, exp, "198.51.100.0/24")
	next := slices.Clone(base)
	removed := 0
	for _, i := range []int{19_998, 15_000, 9_000, 4_000, 10} { // descending, all IPv4 (every 10th is IPv6)
		next = slices.Delete(next, i, i+1)
		removed++
	}
	next = slices.DeleteFunc(next, func(e deny.Entry) bool { return e.Value == "198.51.100.0/24" })
	added := denyEntries(7, 6, exp)
	next = append(next, added...)
	next = append(next, deny.Entry{Kind: deny.KindCIDR, Value: "203.0.113.0/24", ExpiresAt: exp})
	dir := t.TempDir()
	write := func(name string, seq uint64, es []deny.Entry) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, signedDeny(t, priv, seq, es), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1, p2 := write("1", 1, base), write("2", 2, next)

	f, err := bpf.Open(netnstest.PinRoot(t), &bpf.Options{MaxSources: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Remove() })
	act := &activeSnap{snap: &snapshot.Snapshot{Version: snapshot.Version{Epoch: 1, Sequence: 1}}, l4: l4{Deny: snapDeny}}
	a := &Agent{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	a.deny = &deny.Watcher{StatePath: p1, PublicKey: pub, Logger: a.log}
	var st syncState
	load := func(path, op string) {
		t.Helper()
		a.deny.StatePath = path
		if err := a.deny.LoadState(); err != nil {
			t.Fatal(err)
		}
		if err := a.syncDeny(f, act, &st); err != nil {
			t.Fatal(err)
		}
		if st.denyLast.Op != op {
			t.Fatalf("%s: op %s, want %s", path, st.denyLast.Op, op)
		}
		want := mergeDeny(act.l4.Deny, a.deny.Current().CIDRs(time.Now()))
		if !slices.Equal(st.deny, want) {
			t.Fatalf("%s: union of %d prefixes differs from a recomputation (%d)", path, len(st.deny), len(want))
		}
		// The maps hold what a full load of the union would: nothing to do.
		if ds, err := f.ReplaceDenyListStats(st.deny); err != nil || ds.Op != "unchanged" {
			t.Fatalf("%s: the full path sees %+v, %v", path, ds, err)
		}
	}
	load(p1, "swap")
	load(p2, "edit")
	// 6 added (203.0.113.0/24 is the snapshot's already); 5 removed (the
	// snapshot keeps 198.51.100.0/24).
	if d := st.denyLast; d.Put != len(added) || d.Delete != removed {
		t.Fatalf("edit: %d put, %d deleted; want %d, %d", d.Put, d.Delete, len(added), removed)
	}
	// A new watcher and agent state with the same list: nothing written.
	st = syncState{}
	a.deny = &deny.Watcher{StatePath: p2, PublicKey: pub, Logger: a.log}
	if err := a.deny.LoadState(); err != nil {
		t.Fatal(err)
	}
	if err := a.syncDeny(f, act, &st); err != nil || st.denyLast.Op != "unchanged" {
		t.Fatalf("same list again: %+v, %v", st.denyLast, err)
	}
}
