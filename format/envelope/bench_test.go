package envelope

import (
	"bytes"
	"testing"
	"time"
)

// BenchmarkOpen80MB opens an 80 MB body cut into 64 KiB blocks: with no
// prev (every block hashed), with prev and one block changed, and with prev
// and none changed (the same document in a new buffer, as a watcher reads
// it again).
//
//	go test -run '^$' -bench Open80MB -benchtime 10x ./format/envelope/
func BenchmarkOpen80MB(b *testing.B) {
	priv, pub := testKey(1)
	const size = 80 << 20
	body := bytes.Repeat([]byte{'a'}, size)
	body[0], body[size-1] = '"', '"'
	var cuts []int
	for c := 64 << 10; c < size; c += 64 << 10 {
		cuts = append(cuts, c)
	}
	v1, err := Seal(priv, testFormat, Version{1, 1}, time.Unix(1, 0), body, cuts)
	if err != nil {
		b.Fatal(err)
	}
	prev, err := Open(v1, pub, testFormat, nil)
	if err != nil {
		b.Fatal(err)
	}
	changed := bytes.Clone(body)
	changed[size/2] = 'b'
	v2, err := Seal(priv, testFormat, Version{1, 2}, time.Unix(2, 0), changed, cuts)
	if err != nil {
		b.Fatal(err)
	}
	same := bytes.Clone(v1)
	run := func(name string, file []byte, prev *Opened, hashed int) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(file)))
			b.ReportAllocs()
			for b.Loop() {
				o, err := Open(file, pub, testFormat, prev)
				if err != nil {
					b.Fatal(err)
				}
				if o.Stat.Hashed != hashed {
					b.Fatalf("hashed %d blocks, want %d", o.Stat.Hashed, hashed)
				}
			}
			b.ReportMetric(float64(len(cuts)+1), "blocks")
		})
	}
	run("full", v1, nil, len(cuts)+1)
	run("prev-1-changed", v2, prev, 1)
	run("prev-none-changed", same, prev, 0)
}
