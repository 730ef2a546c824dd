package h2

import "strings"

// blockEncoder writes the HPACK header blocks of responses (RFC 7541)
// without the dynamic table: a :status in the static table is one indexed
// byte, and every other field is a literal without indexing, with its name
// indexed when the static table has it (§6.2.2) and its value raw.
//
// Why not x/net's hpack.Encoder: it looks every field up in two maps of
// its dynamic table and inserts or evicts on every new value (Date changes
// every second). Under h2load -m10 that was 5 % of the proxy's CPU
// (WriteField); this costs one map lookup a field, which the header name's
// lowering did anyway (BenchmarkBlockEncoder: see the README). The price is
// bytes: a field the client has seen costs its name index and its value
// instead of one byte, about 60 bytes a typical proxied response.
// Decoders must accept every representation used here; the test decodes
// what this writes with x/net's decoder.
type blockEncoder struct {
	buf []byte
	// tableSize is the dynamic table size this encoder announced (it holds
	// nothing); update is set when the peer's SETTINGS_HEADER_TABLE_SIZE
	// fell below it and the next block must begin with the new size (§4.2,
	// §6.3).
	tableSize uint32
	update    bool
}

func newBlockEncoder() blockEncoder { return blockEncoder{tableSize: 4096} }

// setTableLimit takes the peer's SETTINGS_HEADER_TABLE_SIZE.
func (e *blockEncoder) setTableLimit(v uint32) {
	if v < e.tableSize {
		e.tableSize = v
		e.update = true
	}
}

// begin starts a block.
func (e *blockEncoder) begin() {
	e.buf = e.buf[:0]
	if e.update {
		e.buf = appendHpackInt(e.buf, 0x20, 5, uint64(e.tableSize))
		e.update = false
	}
}

// status writes :status.
func (e *blockEncoder) status(code int) {
	if i := staticStatus(code); i != 0 {
		e.buf = append(e.buf, 0x80|i) // indexed field (§6.1)
		return
	}
	e.buf = appendHpackInt(e.buf, 0, 4, 8) // :status is static name 8
	e.appendString(statusText(code))
}

// field writes a lower-case name and its value; index is the name's static
// table index, 0 when it has none.
func (e *blockEncoder) field(name string, index uint8, value string) {
	if index != 0 {
		e.buf = appendHpackInt(e.buf, 0, 4, uint64(index))
	} else {
		e.buf = append(e.buf, 0)
		e.appendString(name)
	}
	e.appendString(value)
}

func (e *blockEncoder) appendString(s string) {
	e.buf = appendHpackInt(e.buf, 0, 7, uint64(len(s))) // H=0: not Huffman coded
	e.buf = append(e.buf, s...)
}

// appendHpackInt appends v with an n-bit prefix (§5.1) after the bits of
// first above it.
func appendHpackInt(b []byte, first byte, n uint, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	for v -= max; v >= 128; v >>= 7 {
		b = append(b, byte(v&0x7f|0x80))
	}
	return append(b, byte(v))
}

func staticStatus(code int) byte {
	switch code {
	case 200:
		return 8
	case 204:
		return 9
	case 206:
		return 10
	case 304:
		return 11
	case 400:
		return 12
	case 404:
		return 13
	case 500:
		return 14
	}
	return 0
}

// staticNames are the names of RFC 7541's static table (Appendix A) from
// index 15 on, where every name has one entry; 1 .. 14 are the pseudo-header
// fields, which responses other than :status do not carry.
var staticNames = [...]string{"accept-charset", "accept-encoding", "accept-language", "accept-ranges",
	"accept", "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
	"content-disposition", "content-encoding", "content-language", "content-length", "content-location",
	"content-range", "content-type", "cookie", "date", "etag", "expect", "expires", "from", "host",
	"if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified",
	"link", "location", "max-forwards", "proxy-authenticate", "proxy-authorization", "range", "referer",
	"refresh", "retry-after", "server", "set-cookie", "strict-transport-security", "transfer-encoding",
	"user-agent", "vary", "via", "www-authenticate"}

var staticIndex = func() map[string]uint8 {
	m := make(map[string]uint8, len(staticNames))
	for i, n := range staticNames {
		m[n] = uint8(15 + i)
	}
	return m
}()

// wireName is a header's name on the wire and its static table index.
type wireName struct {
	name   string
	static uint8
}

// wireNameOf is the wire name of a canonical header key; ok is false for a
// name that cannot be sent.
func wireNameOf(k string) (wireName, bool) {
	if w, ok := commonWire[k]; ok {
		return w, true
	}
	for i := 0; i < len(k); i++ {
		if k[i] >= 0x80 {
			return wireName{}, false
		}
	}
	l := strings.ToLower(k)
	return wireName{l, staticIndex[l]}, true
}
