package agent

import (
	"crypto/ed25519"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/bpf/netnstest"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/denywatch"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// denyEntries makes n distinct CIDR entries: 90% IPv4 /16–/32, 10% IPv6
// /32–/128 (like bpf's bigList), plus extra.
func denyEntries(seed uint64, n int, exp time.Time, extra ...string) []deny.Entry {
	r := rand.New(rand.NewPCG(seed, 1))
	seen := make(map[netip.Prefix]bool, n)
	out := make([]deny.Entry, 0, n+len(extra))
	for len(out) < n {
		var p netip.Prefix
		if len(out)%10 == 9 {
			var a [16]byte
			a[0], a[1] = 0x24, byte(r.IntN(256))
			for i := 2; i < 16; i++ {
				a[i] = byte(r.Uint32())
			}
			p = netip.PrefixFrom(netip.AddrFrom16(a), 32+r.IntN(97)).Masked()
		} else {
			a := netip.AddrFrom4([4]byte{byte(1 + r.IntN(180)), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
			p = netip.PrefixFrom(a, 16+r.IntN(17)).Masked()
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, deny.Entry{Kind: deny.KindCIDR, Value: p.String(), ExpiresAt: exp})
		}
	}
	for _, v := range extra {
		out = append(out, deny.Entry{Kind: deny.KindCIDR, Value: v, ExpiresAt: exp})
	}
	return out
}

func signedDeny(b testing.TB, priv ed25519.PrivateKey, seq uint64, es []deny.Entry) []byte {
	data, err := deny.Build(es, seq, priv, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkDenyApply1M times the agent's deny path for a 1,000,000-CIDR
// channel list (90% IPv4): parse (denywatch.Watcher.LoadState), union with the
// snapshot's list, map update (syncDeny); for a whole new list, a 2-entry
// change, a pass with nothing changed, and a restart (a new filter on the
// same pins, a new agent state: the pinned tries are adopted).
func BenchmarkDenyApply1M(b *testing.B) {
	needRoot(b)
	pub, priv, _ := ed25519.GenerateKey(nil)
	exp := time.Now().Add(24 * time.Hour)
	a1 := denyEntries(1, 1_000_000, exp)
	// A20: 10 entries removed and 10 added, spread over the list.
	a20 := slices.Clone(a1)
	for i := range 10 {
		a20 = slices.Delete(a20, i*99_000+7, i*99_000+8)
	}
	a20 = append(a20, denyEntries(3, 10, exp)...)
	dir := b.TempDir()
	files := map[string]string{}
	for name, es := range map[string][]deny.Entry{
		"A":   a1,
		"B":   denyEntries(2, 1_000_000, exp),
		"A2":  append(a1[:len(a1):len(a1)], deny.Entry{Kind: deny.KindCIDR, Value: "192.0.2.0/24", ExpiresAt: exp}, deny.Entry{Kind: deny.KindCIDR, Value: "2001:db8::/48", ExpiresAt: exp}),
		"A20": a20,
	} {
		files[name] = filepath.Join(dir, name)
		seq := uint64(2) // each a successor of A
		if name == "A" {
			seq = 1
		}
		if err := os.WriteFile(files[name], signedDeny(b, priv, seq, es), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	root := netnstest.PinRoot(b)
	f, err := bpf.Open(root, &bpf.Options{MaxSources: 1024})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Remove() })
	act := &activeSnap{snap: &snapshot.Snapshot{Version: snapshot.Version{Epoch: 1, Sequence: 1}},
		l4: l4{Deny: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}}
	a := &Agent{log: slog.New(slog.NewTextHandler(io.Discard, nil)), c: Config{PublicKey: pub}}
	var st syncState
	// apply loads a file as the agent does at start (a new watcher) or on
	// a change (next: the watcher holding the previous list reads the new
	// file, deny.ParseNext).
	var cpu time.Duration // process CPU time (user + system) of the last apply
	apply := func(f *bpf.Filter, name string, next bool) (parse, total time.Duration) {
		runtime.GC() // not timed
		c0 := cpuTime(b)
		t0 := time.Now()
		defer func() { total, cpu = time.Since(t0), cpuTime(b)-c0 }()
		a.fmu.Lock()
		a.f = f
		a.fmu.Unlock()
		if next {
			a.deny.StatePath = files[name]
		} else {
			a.deny = &denywatch.Watcher{StatePath: files[name], PublicKey: pub, Logger: a.log, Parse: a.parseDeny}
		}
		if err := a.deny.LoadState(); err != nil {
			b.Fatal(err)
		}
		parse = time.Since(t0)
		if err := a.syncDeny(f, act, &st); err != nil {
			b.Fatal(err)
		}
		return parse, 0
	}
	report := func(b *testing.B, p time.Duration, ds denyApply, total time.Duration) {
		b.Helper()
		b.ReportMetric(float64(p.Milliseconds()), "parse-ms")
		b.ReportMetric(float64(ds.union.Milliseconds()), "union-ms")
		b.ReportMetric(float64(ds.Prepare.Milliseconds()), "prepare-ms")
		b.ReportMetric(float64(ds.Maps.Milliseconds()), "maps-ms")
		b.ReportMetric(float64(ds.Fill.Milliseconds()), "fill-ms") // kernel fill overlapping the parse
		b.ReportMetric(float64((total - p).Milliseconds()), "apply-ms")
		b.ReportMetric(float64(total.Milliseconds()), "total-ms") // file read → maps written (ns/op adds a forced GC)
		b.ReportMetric(float64(cpu.Milliseconds()), "cpu-ms")     // CPU time of the process meanwhile (all goroutines)
		b.Logf("%s: %d put, %d deleted", ds.Op, ds.Put, ds.Delete)
	}
	apply(f, "A", false)
	for _, c := range []struct{ name, from, to string }{{"swap", "A", "B"}, {"change2", "A", "A2"}, {"change20", "A", "A20"}} {
		b.Run(c.name, func(b *testing.B) {
			var p, total time.Duration
			for b.Loop() {
				b.StopTimer()
				apply(f, c.from, false)
				b.StartTimer()
				p, total = apply(f, c.to, true)
			}
			report(b, p, st.denyLast, total)
		})
	}
	// change2-steady: the 2-entry change on a watcher that has been running
	// (its read buffers and the union warm), as on a node getting a stream
	// of small changes: the list goes A → A2 → A → A2 …, each file with a
	// higher sequence (built untimed); the A2 steps are timed.
	b.Run("change2-steady", func(b *testing.B) {
		apply(f, "A", false)
		seq := uint64(10)
		step := func(es []deny.Entry) string {
			seq++
			p := filepath.Join(dir, "steady")
			if err := os.WriteFile(p, signedDeny(b, priv, seq, es), 0o600); err != nil {
				b.Fatal(err)
			}
			files["steady"] = p
			return "steady"
		}
		a2 := append(a1[:len(a1):len(a1)], deny.Entry{Kind: deny.KindCIDR, Value: "192.0.2.0/24", ExpiresAt: exp}, deny.Entry{Kind: deny.KindCIDR, Value: "2001:db8::/48", ExpiresAt: exp})
		apply(f, step(a2), true) // warm: both buffers and the union's room
		var p, total time.Duration
		for b.Loop() {
			b.StopTimer()
			apply(f, step(a1), true)
			name := step(a2)
			b.StartTimer()
			p, total = apply(f, name, true)
		}
		report(b, p, st.denyLast, total)
	})
	apply(f, "A", false)
	b.Run("idle-pass", func(b *testing.B) { // a pass with nothing changed
		for b.Loop() {
			if err := a.syncDeny(f, act, &st); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restart", func(b *testing.B) { // a new agent on the same pins, same list
		for b.Loop() {
			b.StopTimer()
			f2, err := bpf.Open(root, &bpf.Options{MaxSources: 1024})
			if err != nil {
				b.Fatal(err)
			}
			st = syncState{}
			b.StartTimer()
			p, total := apply(f2, "A", false)
			b.StopTimer()
			report(b, p, st.denyLast, total)
			f2.Close()
			b.StartTimer()
		}
	})
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
