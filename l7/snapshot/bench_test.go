package snapshot_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/snapshot/snapgen"
)

// benchCompile measures `rampart snapshot build` minus file I/O: normalise,
// validate, canonical encoding and signing, then the proxy's Parse
// (digest, signature, strict decode, validation).
func benchCompile(b *testing.B, hosts, perHost int) {
	privPEM, pubPEM, _ := snapshot.GenerateKey()
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	base := snapgen.Config(hosts, perHost)
	b.ReportMetric(float64(len(base.Routes)), "routes")
	var size int
	for b.Loop() {
		c := *base
		c.Routes = append([]snapshot.Route(nil), base.Routes...)
		file, err := snapshot.Build(&c, priv, time.Unix(1, 0))
		if err != nil {
			b.Fatal(err)
		}
		size = len(file)
		if _, err := snapshot.Parse(file, pub); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "file-bytes")
}

func BenchmarkBuildAndParse20k(b *testing.B)  { benchCompile(b, 200, 103) }
func BenchmarkBuildAndParse300k(b *testing.B) { benchCompile(b, 3000, 103) }

// BenchmarkSnapshotHeap20k reports the heap a parsed 20,000-route snapshot
// holds (config and canonical bytes).
func BenchmarkSnapshotHeap20k(b *testing.B) {
	privPEM, pubPEM, _ := snapshot.GenerateKey()
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	file, err := snapshot.Build(snapgen.Config(200, 103), priv, time.Unix(1, 0))
	if err != nil {
		b.Fatal(err)
	}
	var keep *snapshot.Snapshot
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := snapshot.Parse(file, pub)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		keep = s
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "heap-bytes")
	}
	runtime.KeepAlive(keep)
}
