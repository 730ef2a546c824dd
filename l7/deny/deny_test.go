package deny

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// t0 is "now" in tests; entries expire an hour or a day later.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testKey(seed byte) (ed25519.PrivateKey, ed25519.PublicKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return priv, priv.Public().(ed25519.PublicKey)
}

func sample() []Entry {
	h, d := t0.Add(time.Hour), t0.Add(24*time.Hour)
	return []Entry{
		{Kind: KindTenant, Value: "acme", ExpiresAt: d, Reason: "unpaid"},
		{Kind: KindCIDR, Value: "10.1.2.3/8", ExpiresAt: h, Reason: "botnet"},
		{Kind: KindCIDR, Value: "2001:db8::1", ExpiresAt: d},
		{Kind: KindCIDR, Value: "::ffff:192.0.2.0/120", ExpiresAt: d, Reason: `quote " and \ slash`},
		{Kind: KindCIDR, Value: "198.51.100.7", ExpiresAt: d, Reason: "scanner"},
		{Kind: KindAPIKeyID, Value: "key_123", ExpiresAt: h.Add(500 * time.Millisecond), Reason: "leaked"},
		{Kind: KindJTI, Value: "8c1f0e2a-jti", ExpiresAt: h},
		{Kind: KindSubject, Value: "user:42", ExpiresAt: d, Reason: "compromised ✓"},
	}
}

func mustBuild(t testing.TB, entries []Entry, seq uint64, priv ed25519.PrivateKey) []byte {
	t.Helper()
	data, err := Build(entries, seq, priv, t0)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestBuildParseRoundTrip(t *testing.T) {
	priv, pub := testKey(1)
	data := mustBuild(t, sample(), 42, priv)
	golden := filepath.Join("testdata", "sample.deny.json")
	if *update {
		if err := os.WriteFile(golden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(golden); err != nil || !bytes.Equal(data, want) {
		t.Errorf("Build output differs from %s (run with -update if intended): %v\n%s", golden, err, data)
	}
	// The order of the source does not change the bytes.
	rev := sample()
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if again := mustBuild(t, rev, 42, priv); !bytes.Equal(again, data) {
		t.Errorf("Build depends on entry order")
	}
	// encoding/json agrees that it is JSON, and what it says.
	var env struct {
		Format   string          `json:"format"`
		Sequence uint64          `json:"sequence"`
		Created  int64           `json:"created_at_unix_nano"`
		SHA256   string          `json:"sha256"`
		List     json.RawMessage `json:"list"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	l, err := Parse(data, pub)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	sum := sha256.Sum256(env.List)
	if l.Sequence() != 42 || env.Sequence != 42 || l.Len() != 8 || l.CreatedAt().UnixNano() != t0.UnixNano() ||
		l.DigestHex() != hex.EncodeToString(sum[:]) || env.SHA256 != l.DigestHex() || env.Format != Format {
		t.Errorf("got seq %d len %d created %v digest %s; envelope %+v", l.Sequence(), l.Len(), l.CreatedAt(), l.DigestHex(), env)
	}
	want := map[Kind]int{KindAPIKeyID: 1, KindJTI: 1, KindSubject: 1, KindTenant: 1, KindCIDR: 4}
	for k, n := range want {
		if l.Count(k) != n {
			t.Errorf("Count(%s) = %d, want %d", k, l.Count(k), n)
		}
	}
	if l.KeyID() != "" && len(l.KeyID()) != 16 {
		t.Errorf("KeyID %q", l.KeyID())
	}
	for _, s := range []string{`"value":"10.0.0.0/8"`, `"value":"192.0.2.0/24"`, `"value":"2001:db8::1/128"`,
		`"reason":"quote \" and \\ slash"`, `"expires_at":"2030-01-02T04:04:06Z"`} {
		if !strings.Contains(string(data), s) {
			t.Errorf("canonical form lacks %s", s)
		}
	}
}

// resign signs arbitrary list bytes, as a buggy or hostile signer would.
func resign(list string, seq uint64) []byte {
	priv, _ := testKey(1)
	return seal([]byte(list), seq, priv, t0.UnixNano())
}

func TestParseRejects(t *testing.T) {
	priv, pub := testKey(1)
	good := mustBuild(t, sample(), 7, priv)
	replace := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("sample has no %q", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	entry := func(s string) string { return `{"entries":[` + s + `]}` }
	exp := `"expires_at":"2030-01-02T04:04:05Z"`
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, good, "", "  ")
	_, otherPub := testKey(2)
	l, _ := Parse(good, pub)
	sum := l.DigestHex()
	cases := []struct {
		name string
		data []byte
		pub  ed25519.PublicKey
		want error
	}{
		{"tampered entry", replace(`"value":"acme"`, `"value":"acmf"`), pub, ErrDigest},
		{"tampered expiry", replace(`2030-01-03T03:04:05Z`, `2031-01-03T03:04:05Z`), pub, ErrDigest},
		{"tampered sequence", replace(`"sequence":7,`, `"sequence":8,`), pub, ErrSignature},
		{"tampered created", replace(`"created_at_unix_nano":1`, `"created_at_unix_nano":2`), pub, ErrSignature},
		{"tampered key id", replace(`"key_id":"`, `"key_id":"0`), pub, ErrSignature},
		{"wrong key", good, otherPub, ErrSignature},
		{"no key", good, nil, ErrSignature},
		{"unsigned", bytes.Replace(good, good[bytes.Index(good, []byte(`"signature":"`))+13:bytes.Index(good, []byte(`","list"`))], nil, 1), pub, ErrSignature},
		{"truncated header", good[:40], pub, ErrMalformed},
		{"truncated list", good[:len(good)-30], pub, ErrMalformed},
		{"truncated last brace", good[:len(good)-2], pub, ErrDigest},
		{"empty", nil, pub, ErrMalformed},
		{"unknown field", replace(`{"format"`, `{"extra":1,"format"`), pub, ErrMalformed},
		{"unknown field last", replace(`"list":`, `"x":1,"list":`), pub, ErrMalformed},
		{"wrong format", replace(Format, "rampart.deny.v2"), pub, ErrMalformed},
		{"reformatted", pretty.Bytes(), pub, ErrMalformed},
		{"trailing garbage", append(bytes.Clone(good), "garbage"...), pub, ErrMalformed},
		{"trailing object", append(bytes.Clone(good), "{}"...), pub, ErrDigest},
		{"leading zero", replace(`"sequence":7,`, `"sequence":07,`), pub, ErrMalformed},
		{"upper-case digest", replace(`"sha256":"`+sum, `"sha256":"`+strings.ToUpper(sum)), pub, ErrMalformed},
		{"too large", make([]byte, MaxFileBytes+1), pub, ErrMalformed},
		{"signed unknown entry field", resign(entry(`{"kind":"jti","value":"a",`+exp+`,"x":1}`), 1), pub, ErrMalformed},
		{"signed unknown kind", resign(entry(`{"kind":"ip","value":"a",`+exp+`}`), 1), pub, ErrMalformed},
		{"signed escape", resign(entry(`{"kind":"jti","value":"\u0041",`+exp+`}`), 1), pub, ErrMalformed},
		{"signed whitespace", resign(entry(` {"kind":"jti","value":"a",`+exp+`}`), 1), pub, ErrMalformed},
		{"signed empty reason", resign(entry(`{"kind":"jti","value":"a",`+exp+`,"reason":""}`), 1), pub, ErrMalformed},
		{"signed no expiry", resign(entry(`{"kind":"jti","value":"a"}`), 1), pub, ErrMalformed},
		{"signed empty value", resign(entry(`{"kind":"jti","value":"",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed unsorted", resign(entry(`{"kind":"jti","value":"b",`+exp+`},{"kind":"jti","value":"a",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed duplicate", resign(entry(`{"kind":"jti","value":"a",`+exp+`},{"kind":"jti","value":"a",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed kinds unsorted", resign(entry(`{"kind":"jti","value":"a",`+exp+`},{"kind":"cidr","value":"10.0.0.0/8",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed cidrs unsorted", resign(entry(`{"kind":"cidr","value":"10.0.0.0/16",`+exp+`},{"kind":"cidr","value":"10.0.0.0/8",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed unmasked cidr", resign(entry(`{"kind":"cidr","value":"10.1.0.0/8",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed bare ip", resign(entry(`{"kind":"cidr","value":"10.1.0.0",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed upper v6", resign(entry(`{"kind":"cidr","value":"2001:DB8::/32",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed mapped v6", resign(entry(`{"kind":"cidr","value":"::ffff:10.0.0.0/104",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed offset time", resign(entry(`{"kind":"jti","value":"a","expires_at":"2030-01-02T04:04:05+01:00"}`), 1), pub, ErrInvalid},
		{"signed fraction", resign(entry(`{"kind":"jti","value":"a","expires_at":"2030-01-02T04:04:05.5Z"}`), 1), pub, ErrInvalid},
		{"signed feb 30", resign(entry(`{"kind":"jti","value":"a","expires_at":"2030-02-30T04:04:05Z"}`), 1), pub, ErrInvalid},
		{"signed control char", resign(entry(`{"kind":"jti","value":"a`+"\x7f"+`",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed long value", resign(entry(`{"kind":"jti","value":"`+strings.Repeat("a", MaxValueBytes+1)+`",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed bad utf-8", resign(entry(`{"kind":"jti","value":"a`+"\xff"+`",`+exp+`}`), 1), pub, ErrInvalid},
		{"signed trailing", resign(entry(`{"kind":"jti","value":"a",`+exp+`}`)+" ", 1), pub, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Parse(c.data, c.pub)
			if !errors.Is(err, c.want) {
				t.Fatalf("Parse = %v, %v; want %v", l, err, c.want)
			}
			t.Log(err)
		})
	}
	// Every truncation fails, with one of the sentinels.
	for n := range len(good) - 1 {
		if _, err := Parse(good[:n], pub); err == nil || !(errors.Is(err, ErrMalformed) || errors.Is(err, ErrDigest)) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	// Only the final newline may go.
	if _, err := Parse(good[:len(good)-1], pub); err != nil {
		t.Errorf("without the final newline: %v", err)
	}
}

func TestBuildRejects(t *testing.T) {
	priv, _ := testKey(1)
	h := t0.Add(time.Hour)
	bad := []Entry{
		{Kind: "ip", Value: "1.2.3.4", ExpiresAt: h},
		{Kind: KindJTI, Value: "", ExpiresAt: h},
		{Kind: KindCIDR, Value: "10.0.0.0/33", ExpiresAt: h},
		{Kind: KindCIDR, Value: "fe80::1%eth0", ExpiresAt: h},
		{Kind: KindSubject, Value: "no-expiry"},
		{Kind: KindSubject, Value: "expired", ExpiresAt: t0},
		{Kind: KindSubject, Value: "far", ExpiresAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Kind: KindTenant, Value: "t\n", ExpiresAt: h},
		{Kind: KindTenant, Value: "ok", ExpiresAt: h, Reason: strings.Repeat("r", MaxReasonBytes+1)},
		{Kind: KindCIDR, Value: "10.9.9.9/8", ExpiresAt: h},
		{Kind: KindCIDR, Value: "10.0.0.0/8", ExpiresAt: h},
	}
	_, err := Build(bad, 1, priv, t0)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Build = %v, want ErrInvalid", err)
	}
	for _, s := range []string{`entry 1 (ip "1.2.3.4"): unknown kind`, `entry 2 (jti "")`, `entry 3 (cidr "10.0.0.0/33")`, `entry 4`, `entry 5`, "no expiry",
		`entry 6`, "not after now", `entry 7`, `entry 8`, `entry 9`, `duplicate entry cidr "10.0.0.0/8"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %s:\n%v", s, err)
		}
	}
	if _, err := Build(nil, 1, priv[:10], t0); err == nil {
		t.Error("Build accepted a short private key")
	}
	// An empty list is a list.
	_, pub := testKey(1)
	if l, err := Parse(mustBuild(t, nil, 3, priv), pub); err != nil || l.Len() != 0 || l.Sequence() != 3 {
		t.Errorf("empty list: %v, %v", l, err)
	}
}

func TestParseYAML(t *testing.T) {
	src := `
- {kind: cidr, value: 203.0.113.0/24, ttl: 1h, reason: botnet}
- kind: api_key_id
  value: key_9
  expires_at: 2030-06-01T00:00:00Z
`
	es, err := ParseYAML([]byte(src), t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || !es[0].ExpiresAt.Equal(t0.Add(time.Hour)) || es[0].Reason != "botnet" ||
		!es[1].ExpiresAt.Equal(time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("got %+v", es)
	}
	if es, err := ParseYAML([]byte("[]"), t0); err != nil || len(es) != 0 {
		t.Errorf("[] = %v, %v", es, err)
	}
	for _, bad := range []string{
		"", "- {kind: jti, value: a}", "- {kind: jti, value: a, ttl: 1h, expires_at: 2030-06-01T00:00:00Z}",
		"- {kind: jti, value: a, ttl: -1h}", "- {kind: jti, value: a, ttl: soon}", "- {kind: jti, value: a, ttl: 1h, color: red}",
		"- {kind: jti, value: a, expires_at: tomorrow}", "[]\n---\n[]", "kind: jti",
	} {
		if _, err := ParseYAML([]byte(bad), t0); err == nil {
			t.Errorf("ParseYAML(%q) accepted", bad)
		}
	}
}
