package nodeclient

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// The client hands a newer purge document to the proxy's file (creating
// its directory), reads what it has after a restart, and refuses an older
// version and a document signed by another key, keeping the file.
func TestPurgeOnlyGoesForward(t *testing.T) {
	dir := t.TempDir()
	cp := &control{}
	srv := cp.serve(t)
	doc := func(key []byte, seq uint64) []byte {
		d := &purge.Document{Version: envelope.Version{Epoch: 1, Sequence: seq},
			Rules: []purge.Rule{{ID: seq, AtUnixNano: time.Now().UnixNano(), Route: "pages"}}}
		f, err := purge.Build(key, d)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	file := filepath.Join(dir, "purge", "purge.json")
	cp.mu.Lock()
	cp.purge = doc(priv, 3)
	cp.mu.Unlock()
	c := newClient(t, srv.URL, dir)
	runUntil(t, c, "purge version 1.3", func() bool { return c.Status().Purge == "1.3" })
	if v := c.PurgeVersion(); v != (envelope.Version{Epoch: 1, Sequence: 3}) {
		t.Fatalf("PurgeVersion %s", v)
	}
	check := func(when string) {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		d, err := purge.Parse(data, pub)
		if err != nil || d.Version.Sequence != 3 || d.Rules[0].Route != "pages" {
			t.Fatalf("%s: the proxy's purge file is %+v, %v", when, d, err)
		}
	}
	check("handed over")
	otherPriv, _, _ := snapshot.GenerateKey()
	other, _ := snapshot.ParsePrivateKey(otherPriv)
	for _, bad := range []struct {
		what string
		file []byte
	}{{"an older version", doc(priv, 2)}, {"the same version", doc(priv, 3)}, {"another key", doc(other, 9)}, {"garbage", []byte("{}")}} {
		cp.mu.Lock()
		cp.purge = bad.file
		cp.reports = nil
		cp.mu.Unlock()
		c = newClient(t, srv.URL, dir) // reads 1.3 from the file
		if got := c.Status().Purge; got != "1.3" {
			t.Fatalf("a restarted client read purge version %q from the file, want 1.3", got)
		}
		runUntil(t, c, "refuse "+bad.what, func() bool { return c.Status().Refused > 0 && cp.reportedRefusal() })
		if st := c.Status(); st.Purge != "1.3" {
			t.Fatalf("after %s: status %+v", bad.what, st)
		}
		check("after " + bad.what)
	}
}
