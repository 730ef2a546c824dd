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
