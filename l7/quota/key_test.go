package quota

import (
	"bytes"
	"testing"
)

func TestBuildKey(t *testing.T) {
	full := &testSource{tenant: "acme", keyID: "k1", ip: "192.0.2.7",
		claims:  map[string]string{"sub": "alice", "empty": ""},
		params:  map[string]string{"id": "42"},
		headers: map[string]string{"X-User": "bob"}}
	tests := []struct {
		name  string
		parts []string
		src   *testSource
		want  string
		ok    bool
	}{
		{"tenant", []string{"tenant"}, full, "acme", true},
		{"api_key", []string{"api_key"}, full, "k1", true},
		{"client_ip", []string{"client_ip"}, full, "192.0.2.7", true},
		{"claim", []string{"claim:sub"}, full, "alice", true},
		{"claim present but empty", []string{"claim:empty"}, full, "", true},
		{"header", []string{"header:X-User"}, full, "bob", true},
		{"param", []string{"param:id"}, full, "42", true},
		{"joined", []string{"tenant", "claim:sub", "param:id"}, full, "acme\x1falice\x1f42", true},
		{"tenant missing", []string{"tenant"}, &testSource{}, "\x1e\x00", false},
		{"api_key missing", []string{"api_key"}, &testSource{}, "\x1e\x00", false},
		{"client_ip missing", []string{"client_ip"}, &testSource{}, "\x1e\x00", false},
		{"claim missing", []string{"claim:nope"}, full, "\x1e\x00", false},
		{"header missing", []string{"header:X-Nope"}, full, "\x1e\x00", false},
		{"param missing", []string{"param:nope"}, full, "\x1e\x00", false},
		{"unknown kind is missing", []string{"cookie:x"}, full, "\x1e\x00", false},
		{"one of two missing keeps the other", []string{"tenant", "header:X-Nope"}, full, "acme\x1f\x1e\x00", false},
		{"separators escaped", []string{"tenant", "claim:sub"},
			&testSource{tenant: "a\x1fb", claims: map[string]string{"sub": "\x1e\x00"}}, "a\x1e\x02b\x1f\x1e\x01\x00", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, 0, 64)
			got, ok := BuildKey(tc.parts, tc.src, buf)
			if string(got) != tc.want || ok != tc.ok {
				t.Fatalf("BuildKey(%q) = %q, %v; want %q, %v", tc.parts, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestBuildKeyNoAllocs(t *testing.T) {
	src := &testSource{tenant: "acme", claims: map[string]string{"sub": "alice"}, headers: map[string]string{"X-User": "b\x1fob"}}
	parts := []string{"tenant", "claim:sub", "header:X-User", "param:missing"}
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { buf, _ = BuildKey(parts, src, buf) }); n != 0 {
		t.Fatalf("BuildKey allocates %v times per call", n)
	}
}

// decodeKey splits a key back into values; nil marks a missing part.
func decodeKey(t *testing.T, key []byte) [][]byte {
	var out [][]byte
	for _, f := range bytes.Split(key, []byte{keySep}) {
		if bytes.Equal(f, []byte{keyEsc, escMissing}) {
			out = append(out, nil)
			continue
		}
		v := []byte{}
		for i := 0; i < len(f); i++ {
			if f[i] != keyEsc {
				v = append(v, f[i])
				continue
			}
			if i+1 == len(f) || (f[i+1] != escEsc && f[i+1] != escSep) {
				t.Fatalf("key %q: bad escape at %d", key, i)
			}
			v = append(v, map[byte]byte{escEsc: keyEsc, escSep: keySep}[f[i+1]])
			i++
		}
		out = append(out, v)
	}
	return out
}

func FuzzBuildKey(f *testing.F) {
	f.Add("tenant", "header:X", "a", "b", "c", "a", "b", "c", uint8(0xff))
	f.Add("claim:x", "param:", "a\x1fb", "", "\x1e", "a", "b\x1f", "", uint8(0x3a))
	f.Add("bogus", "client_ip", "\x1e\x00", "\x1f", "", "", "\x1e\x00", "x", uint8(0x15))
	f.Fuzz(func(t *testing.T, p1, p2, a1, a2, a3, b1, b2, b3 string, present uint8) {
		mk := func(c, p, h string, bits uint8) (*testSource, []*string) {
			s := &testSource{tenant: c, ip: p, keyID: h, claims: map[string]string{}, params: map[string]string{},
				headers: map[string]string{"H": h}}
			want := []*string{nil, nil, nil}
			if bits&1 != 0 {
				s.claims["c"], want[0] = c, &c
			}
			if bits&2 != 0 {
				s.params["p"], want[1] = p, &p
			}
			if h != "" {
				want[2] = &h
			}
			return s, want
		}
		// Arbitrary parts never panic.
		sa, wa := mk(a1, a2, a3, present)
		BuildKey([]string{p1, p2, p1 + ":" + p2}, sa, nil)
		// Keys decode back to their values, so distinct values never collide.
		parts := []string{"claim:c", "param:p", "header:H"}
		sb, wb := mk(b1, b2, b3, present>>2)
		ka, oka := BuildKey(parts, sa, nil)
		kb, _ := BuildKey(parts, sb, make([]byte, 3, 8))
		for _, c := range []struct {
			key  []byte
			want []*string
		}{{ka, wa}, {kb, wb}} {
			got := decodeKey(t, c.key)
			if len(got) != 3 {
				t.Fatalf("key %q has %d parts", c.key, len(got))
			}
			for i := range got {
				if (got[i] == nil) != (c.want[i] == nil) || (got[i] != nil && string(got[i]) != *c.want[i]) {
					t.Fatalf("key %q part %d = %q, want %v", c.key, i, got[i], c.want[i])
				}
			}
		}
		if oka != (wa[0] != nil && wa[1] != nil && wa[2] != nil) {
			t.Fatalf("ok = %v for %q", oka, ka)
		}
		same := true
		for i := range wa {
			if (wa[i] == nil) != (wb[i] == nil) || (wa[i] != nil && *wa[i] != *wb[i]) {
				same = false
			}
		}
		if same != bytes.Equal(ka, kb) {
			t.Fatalf("values equal %v but keys %q and %q", same, ka, kb)
		}
	})
}
