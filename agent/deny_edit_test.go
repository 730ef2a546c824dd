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
	"github.com/rampart-edge/rampart/l7/denywatch"
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
	a.deny = &denywatch.Watcher{StatePath: p1, PublicKey: pub, Logger: a.log}
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
	a.deny = &denywatch.Watcher{StatePath: p2, PublicKey: pub, Logger: a.log}
	if err := a.deny.LoadState(); err != nil {
		t.Fatal(err)
	}
	if err := a.syncDeny(f, act, &st); err != nil || st.denyLast.Op != "unchanged" {
		t.Fatalf("same list again: %+v, %v", st.denyLast, err)
	}
}

// TestDenyStreamed: once tries are installed, a whole new channel list is
// streamed into fresh tries while the watcher decodes it and swapped in by
// the next sync pass with the snapshot's prefixes: the union and the maps
// are what a full recomputation gives. A file that fails to verify, or a
// stale one (parsed, then refused for its sequence), leaves the maps as
// they were and no fresh tries behind.
func TestDenyStreamed(t *testing.T) {
	needRoot(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	exp := time.Now().Add(24 * time.Hour)
	snapDeny := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:7::/48")}
	dir := t.TempDir()
	write := func(name string, seq uint64, es []deny.Entry) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, signedDeny(t, priv, seq, es), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := write("1", 1, denyEntries(1, 20_000, exp))
	p2 := write("2", 2, denyEntries(2, 30_000, exp, "198.51.100.0/24", "2001:db8:7:1::5/128"))
	bad, _ := os.ReadFile(write("3", 3, denyEntries(3, 30_000, exp)))
	bad[len(bad)-40] ^= 1 // inside the list: the digest fails
	p3 := filepath.Join(dir, "3")
	if err := os.WriteFile(p3, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	p4 := write("4", 1, denyEntries(4, 30_000, exp)) // stale

	f, err := bpf.Open(netnstest.PinRoot(t), &bpf.Options{MaxSources: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Remove() })
	act := &activeSnap{snap: &snapshot.Snapshot{Version: snapshot.Version{Epoch: 1, Sequence: 1}}, l4: l4{Deny: snapDeny}}
	a := &Agent{log: slog.New(slog.NewTextHandler(io.Discard, nil)), c: Config{PublicKey: pub}, f: f}
	a.deny = &denywatch.Watcher{PublicKey: pub, Logger: a.log, Parse: a.parseDeny}
	var st syncState
	load := func(path string, loadErr bool, op string, fill bool) {
		t.Helper()
		a.deny.StatePath = path
		if err := a.deny.LoadState(); (err != nil) != loadErr {
			t.Fatalf("%s: LoadState: %v", path, err)
		}
		if err := a.syncDeny(f, act, &st); err != nil {
			t.Fatal(err)
		}
		if st.denyLast.Op != op || (st.denyLast.Fill > 0) != fill {
			t.Fatalf("%s: %+v, want op %s, filled while parsing %v", path, st.denyLast, op, fill)
		}
		want := mergeDeny(act.l4.Deny, a.deny.Current().CIDRs(time.Now()))
		if !slices.Equal(st.deny, want) {
			t.Fatalf("%s: union of %d prefixes differs from a recomputation (%d)", path, len(st.deny), len(want))
		}
		if ds, err := f.ReplaceDenyListStats(st.deny); err != nil || ds.Op != "unchanged" {
			t.Fatalf("%s: the full path sees %+v, %v", path, ds, err)
		}
		if a.denyStage.take() != nil {
			t.Fatalf("%s: fresh tries left staged", path)
		}
	}
	load(p1, false, "swap", false) // nothing installed yet: the full path (which may adopt)
	load(p2, false, "swap", true)
	// The stream did the work: the pass with nothing new does nothing.
	if err := a.syncDeny(f, act, &st); err != nil || st.denyLast.Op != "swap" || st.denyFrom.list != a.deny.Current() {
		t.Fatalf("idle pass: %+v, %v", st.denyLast, err)
	}
	cur := a.deny.Current()
	unchanged := func(what string) {
		t.Helper()
		if err := a.syncDeny(f, act, &st); err != nil {
			t.Fatal(err)
		}
		if a.deny.Current() != cur || st.denyFrom.list != cur {
			t.Fatalf("%s: the list in force changed", what)
		}
		if ds, err := f.ReplaceDenyListStats(st.deny); err != nil || ds.Op != "unchanged" {
			t.Fatalf("%s: the maps changed: the full path sees %+v, %v", what, ds, err)
		}
	}
	a.deny.StatePath = p3
	if err := a.deny.LoadState(); err == nil {
		t.Fatal("a corrupt file loaded")
	}
	if a.denyStage.take() != nil {
		t.Fatal("a corrupt file's fresh tries were staged")
	}
	unchanged("corrupt")
	a.deny.StatePath = p4
	if err := a.deny.LoadState(); err != nil {
		t.Fatal(err)
	}
	a.denyStage.mu.Lock()
	staged := a.denyStage.s != nil
	a.denyStage.mu.Unlock()
	if !staged {
		t.Fatal("the stale file was not streamed (the test checks its fresh tries are dropped)")
	}
	unchanged("stale")
	if a.denyStage.take() != nil {
		t.Fatal("the stale file's fresh tries are still staged")
	}
}
