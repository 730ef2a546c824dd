package h2

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

type kv struct{ name, value string }

// decodeBlock decodes b with x/net's decoder (table limit 4096).
func decodeBlock(t testing.TB, d *hpack.Decoder, b []byte) []kv {
	t.Helper()
	var got []kv
	d.SetEmitFunc(func(f hpack.HeaderField) { got = append(got, kv{f.Name, f.Value}) })
	if _, err := d.Write(b); err != nil {
		t.Fatalf("decode %x: %v", b, err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("decode %x: close: %v", b, err)
	}
	return got
}

// Every status, every static name, names outside the table, and values
// whose length needs a multi-byte integer decode back as written.
func TestBlockEncoderRoundTrip(t *testing.T) {
	e := newBlockEncoder()
	d := hpack.NewDecoder(4096, nil)
	for _, code := range []int{100, 103, 200, 204, 206, 301, 302, 304, 400, 404, 418, 500, 503, 599} {
		e.begin()
		e.status(code)
		got := decodeBlock(t, d, e.buf)
		if want := []kv{{":status", fmt.Sprint(code)}}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("status %d: got %v", code, got)
		}
	}
	var want []kv
	e.begin()
	e.status(200)
	want = append(want, kv{":status", "200"})
	for _, n := range staticNames {
		e.field(n, staticIndex[n], "v-"+n)
		want = append(want, kv{n, "v-" + n})
	}
	for _, f := range []kv{{"x-custom", ""}, {"x-long", strings.Repeat("v", 127)}, {"x-longer", strings.Repeat("w", 300)},
		{strings.Repeat("n", 200), strings.Repeat("z", 70000)}, {"date", "Thu, 03 Dec 2026 17:18:31 GMT"}} {
		e.field(f.name, staticIndex[f.name], f.value)
		want = append(want, f)
	}
	d.SetMaxStringLength(1 << 20)
	if got := decodeBlock(t, d, e.buf); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// The encoder's table limit follows the peer's SETTINGS_HEADER_TABLE_SIZE:
// a lower limit is announced once, at the start of the next block, and a
// decoder that allows only the lower size accepts the block.
func TestBlockEncoderTableSizeUpdate(t *testing.T) {
	e := newBlockEncoder()
	e.setTableLimit(8192) // above 4096: the encoder keeps 4096, nothing to announce
	e.begin()
	e.status(200)
	if len(e.buf) != 1 {
		t.Fatalf("block %x: want one byte, no size update", e.buf)
	}
	e.setTableLimit(100)
	e.setTableLimit(0)
	e.begin()
	e.status(404)
	if e.buf[0] != 0x20 { // size update to 0
		t.Fatalf("block %x: want a size update to 0 first", e.buf)
	}
	d := hpack.NewDecoder(4096, nil)
	d.SetAllowedMaxDynamicTableSize(0)
	if got := decodeBlock(t, d, e.buf); len(got) != 1 || got[0].value != "404" {
		t.Fatalf("got %v", got)
	}
	e.begin()
	e.status(200)
	if len(e.buf) != 1 {
		t.Fatalf("second block %x: the update is sent once", e.buf)
	}
}

// Canonical keys get their lower-case wire name and static index, common
// or not; a name with a byte over 0x7f cannot be sent.
func TestWireNameOf(t *testing.T) {
	for k, want := range map[string]wireName{
		"Content-Type": {"content-type", 31}, "Date": {"date", 33}, "Server": {"server", 54},
		"X-Request-Id": {"x-request-id", 0}, "Www-Authenticate": {"www-authenticate", 61},
		"If-Range": {"if-range", 42}, "X-Odd-Name": {"x-odd-name", 0},
	} {
		if got, ok := wireNameOf(k); !ok || got != want {
			t.Errorf("%s: %+v %v, want %+v", k, got, ok, want)
		}
	}
	if _, ok := wireNameOf("X-\xc3\xa9"); ok {
		t.Error("a non-ASCII name was accepted")
	}
	if got := http.CanonicalHeaderKey("content-type"); commonWire[got].static != 31 {
		t.Errorf("common %s has index %d", got, commonWire[got].static)
	}
}

// FuzzBlockEncoder: whatever valid field is written decodes back the same.
func FuzzBlockEncoder(f *testing.F) {
	f.Add(200, "content-type", "text/plain", uint32(4096))
	f.Add(418, "x-a", strings.Repeat("b", 200), uint32(0))
	f.Fuzz(func(t *testing.T, code int, name, value string, limit uint32) {
		if code < 100 || code > 999 || !validWireName(name) || !validFieldValue(value) || len(name)+len(value) > 1<<16 {
			return
		}
		e := newBlockEncoder()
		e.setTableLimit(limit)
		e.begin()
		e.status(code)
		e.field(name, staticIndex[name], value)
		d := hpack.NewDecoder(4096, nil)
		d.SetAllowedMaxDynamicTableSize(min(limit, 4096))
		d.SetMaxStringLength(1 << 17)
		got := decodeBlock(t, d, e.buf)
		want := []kv{{":status", fmt.Sprint(code)}, {name, value}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

// BenchmarkBlockEncoder: a typical proxied response's header block, with
// this encoder and with x/net's (its table warm: every field indexed after
// the first block, as with a Date that has not changed).
func BenchmarkBlockEncoder(b *testing.B) {
	h := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"96"}, "Server": {"nginx/1.22.1"},
		"Date": {"Thu, 03 Dec 2026 17:18:31 GMT"}, "X-Request-Id": {"0123456789abcdef"}}
	b.Run("rampart", func(b *testing.B) {
		e := newBlockEncoder()
		b.ReportAllocs()
		for range b.N {
			e.begin()
			e.status(200)
			for k, vv := range h {
				wn, _ := wireNameOf(k)
				for _, v := range vv {
					e.field(wn.name, wn.static, v)
				}
			}
		}
	})
	b.Run("xnet", func(b *testing.B) {
		var buf strings.Builder
		enc := hpack.NewEncoder(&buf)
		b.ReportAllocs()
		for range b.N {
			buf.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			for k, vv := range h {
				wn, _ := wireNameOf(k)
				for _, v := range vv {
					_ = enc.WriteField(hpack.HeaderField{Name: wn.name, Value: v})
				}
			}
		}
	})
}
