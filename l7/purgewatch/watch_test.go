package purgewatch

import (
	"crypto/ed25519"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
	"github.com/rampart-edge/rampart/l7/cache"
)

func keys(t *testing.T) (ed25519.PrivateKey, ed25519.PublicKey) {
	privPEM, pubPEM, err := envelope.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := envelope.ParsePrivateKey(privPEM)
	pub, _ := envelope.ParsePublicKey(pubPEM)
	return priv, pub
}

func put(s *cache.Store, key, route, target string, stored time.Time, sk ...string) {
	s.Put(key, http.Header{}, &cache.Object{Status: 200, Header: http.Header{}, Stored: stored, Lifetime: time.Hour,
		Route: route, Target: target, Surrogate: sk})
}

func TestMatcher(t *testing.T) {
	at := time.Now()
	before, after := at.Add(-time.Second), at.Add(time.Second)
	o := &cache.Object{Stored: before, Route: "pages", Target: "example.com/blog/1", Surrogate: []string{"post-1", "blog"}}
	cases := []struct {
		rule purge.Rule
		want bool
	}{
		{purge.Rule{Route: "pages"}, true},
		{purge.Rule{Route: "other"}, false},
		{purge.Rule{Prefix: "example.com/blog/"}, true},
		{purge.Rule{Prefix: "example.com/shop/"}, false},
		{purge.Rule{SurrogateKey: "blog"}, true},
		{purge.Rule{SurrogateKey: "blo"}, false},
		{purge.Rule{Route: "pages", Prefix: "example.com/shop"}, false},
	}
	for _, c := range cases {
		c.rule.AtUnixNano = at.UnixNano()
		if got := Matcher(c.rule)(o); got != c.want {
			t.Errorf("%+v: %v, want %v", c.rule, got, c.want)
		}
	}
	newer := *o
	newer.Stored = after
	if Matcher(purge.Rule{Route: "pages", AtUnixNano: at.UnixNano()})(&newer) {
		t.Error("a rule removed an object stored after it")
	}
}

func TestWatcherAppliesNewRulesOnce(t *testing.T) {
	priv, pub := keys(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "purge.json")
	st := cache.NewStore(1 << 20)
	old := time.Now().Add(-time.Minute)
	put(st, "a", "pages", "h/a", old)
	put(st, "b", "api", "h/b", old)
	var applied []uint64
	w, err := New(Config{Path: path, StatePath: filepath.Join(dir, "state.json"), PublicKey: pub,
		Store: func() *cache.Store { return st }, OnApply: func(r purge.Rule, n int) { applied = append(applied, r.ID) }})
	if err != nil {
		t.Fatal(err)
	}
	write := func(d *purge.Document) {
		f, err := purge.Build(priv, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := envelope.WriteFileAtomic(path, f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := purge.Append(nil, time.Now(), "pages", "", "")
	write(d)
	w.Scan()
	if st.Get("a", http.Header{}) != nil || st.Get("b", http.Header{}) == nil {
		t.Fatal("route purge removed the wrong objects")
	}
	put(st, "a", "pages", "h/a", time.Now().Add(time.Second)) // stored after rule 1
	d = purge.Append(d, time.Now(), "", "h/b", "")
	write(d)
	w.Scan()
	if st.Get("b", http.Header{}) != nil || st.Get("a", http.Header{}) == nil {
		t.Fatal("rule 1 ran again or rule 2 did not run")
	}
	if v, last := w.Current(); v.Sequence != 2 || last != 2 || len(applied) != 2 {
		t.Fatalf("version %s last %d applied %v", v, last, applied)
	}
	// A bad file is refused and the document in force stays.
	if err := os.WriteFile(path, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.Scan()
	if v, _ := w.Current(); v.Sequence != 2 || w.Refusals()["malformed"] == 0 {
		t.Fatalf("after junk: %s %v", v, w.Refusals())
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, pub := keys(t)
	st := func() *cache.Store { return nil }
	for name, c := range map[string]Config{
		"no path":  {PublicKey: pub, Store: st},
		"no key":   {Path: "x", Store: st},
		"no store": {Path: "x", PublicKey: pub},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func putFetched(s *cache.Store, key, route, target string, fetched time.Time) {
	s.Put(key, http.Header{}, &cache.Object{Status: 200, Header: http.Header{}, Stored: time.Now(), Fetched: fetched,
		Lifetime: time.Hour, Route: route, Target: target})
}

func writeDoc(t *testing.T, priv ed25519.PrivateKey, path string, d *purge.Document) {
	t.Helper()
	f, err := purge.Build(priv, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.WriteFileAtomic(path, f, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWatcherGapDropsOlder: rules 2..4 left the document before the proxy
// saw them; everything fetched before rule 5 goes, whatever its route,
// and what was fetched after it stays.
func TestWatcherGapDropsOlder(t *testing.T) {
	priv, pub := keys(t)
	path := filepath.Join(t.TempDir(), "purge.json")
	st := cache.NewStore(1 << 20)
	var missed [3]uint64
	w, err := New(Config{Path: path, PublicKey: pub, Store: func() *cache.Store { return st },
		OnMissed: func(from, to uint64, n int) { missed = [3]uint64{from, to, uint64(n)} }})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour)
	writeDoc(t, priv, path, &purge.Document{Version: envelope.Version{Epoch: 1, Sequence: 1},
		Rules: []purge.Rule{{ID: 1, AtUnixNano: t0.UnixNano(), Route: "gone"}}})
	w.Scan()
	if _, last := w.Current(); last != 1 || missed[0] != 0 {
		t.Fatalf("after rule 1: last %d missed %v", last, missed)
	}
	t5 := time.Now().Add(-10 * time.Minute)
	putFetched(st, "old-a", "a", "h/a", t5.Add(-time.Minute))
	putFetched(st, "old-b", "b", "h/b", t5.Add(-time.Second))
	putFetched(st, "new-a", "a", "h/a2", t5.Add(time.Minute))
	writeDoc(t, priv, path, &purge.Document{Version: envelope.Version{Epoch: 1, Sequence: 5},
		Rules: []purge.Rule{{ID: 5, AtUnixNano: t5.UnixNano(), Route: "z"}, {ID: 6, AtUnixNano: t5.Add(time.Second).UnixNano(), Route: "z"}}})
	w.Scan()
	if missed != [3]uint64{2, 4, 2} {
		t.Fatalf("missed = %v, want rules 2..4 and 2 objects removed", missed)
	}
	if st.Get("old-a", http.Header{}) != nil || st.Get("old-b", http.Header{}) != nil || st.Get("new-a", http.Header{}) == nil {
		t.Fatal("the gap did not remove exactly what was fetched before the oldest listed rule")
	}
	if _, last := w.Current(); last != 6 {
		t.Fatalf("last applied %d, want 6", last)
	}
	// No gap: rule 7 follows 6, nothing extra goes.
	putFetched(st, "old-c", "c", "h/c", t5.Add(-time.Hour))
	missed = [3]uint64{}
	writeDoc(t, priv, path, &purge.Document{Version: envelope.Version{Epoch: 1, Sequence: 6},
		Rules: []purge.Rule{{ID: 6, AtUnixNano: t5.Add(time.Second).UnixNano(), Route: "z"}, {ID: 7, AtUnixNano: time.Now().UnixNano(), Route: "z"}}})
	w.Scan()
	if missed[0] != 0 || st.Get("old-c", http.Header{}) == nil {
		t.Fatalf("a gap was seen without one: %v", missed)
	}
}

// TestWatcherSkewUsesLaterClock: the control plane's clock is an hour
// behind this node's; an object this node fetched a minute before it saw
// the rule still goes, and one fetched after it stays.
func TestWatcherSkewUsesLaterClock(t *testing.T) {
	priv, pub := keys(t)
	path := filepath.Join(t.TempDir(), "purge.json")
	st := cache.NewStore(1 << 20)
	w, err := New(Config{Path: path, PublicKey: pub, Store: func() *cache.Store { return st }})
	if err != nil {
		t.Fatal(err)
	}
	putFetched(st, "a", "pages", "h/a", time.Now().Add(-time.Minute))
	behind := time.Now().Add(-time.Hour)
	writeDoc(t, priv, path, purge.Append(nil, behind, "pages", "", ""))
	w.Scan()
	if st.Get("a", http.Header{}) != nil {
		t.Fatal("an object fetched before the rule was seen survived (the rule's own time is an hour behind)")
	}
	if st.Put("in-flight", http.Header{}, &cache.Object{Status: 200, Header: http.Header{}, Stored: time.Now(),
		Fetched: time.Now().Add(-time.Second), Lifetime: time.Hour, Route: "pages"}) {
		t.Fatal("a response fetched before the rule was seen was stored after it")
	}
	putFetched(st, "b", "pages", "h/b", time.Now().Add(time.Millisecond))
	if st.Get("b", http.Header{}) == nil {
		t.Fatal("an object fetched after the rule was seen was not stored")
	}
}
