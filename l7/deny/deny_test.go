package deny

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
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
		Epoch    uint64          `json:"epoch"`
		Sequence uint64          `json:"sequence"`
		Created  int64           `json:"created_at_unix_nano"`
		Body     json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	l, err := Parse(data, pub)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	o, err := envelope.Open(data, pub, Format, nil)
	if err != nil {
		t.Fatalf("envelope.Open: %v", err)
	}
	if l.Sequence() != 42 || env.Sequence != 42 || env.Epoch != 0 || l.Len() != 8 || l.CreatedAt().UnixNano() != t0.UnixNano() ||
		l.DigestHex() != hex.EncodeToString(o.Manifest[:]) || !bytes.Equal(env.Body, o.Body()) || env.Format != Format {
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

// resign signs arbitrary list bytes as one block, as a buggy or hostile
// signer would.
func resign(list string, seq uint64) []byte {
	return resignCut(list, nil, envelope.Version{Sequence: seq})
}

// resignCut seals list bytes cut at cuts, building the envelope by its
// documented rules rather than with envelope.Seal, which refuses a body
// that is not JSON: a hostile signer would not.
func resignCut(list string, cuts []int, v envelope.Version) []byte {
	priv, pub := testKey(1)
	keyID, _ := hex.DecodeString(envelope.KeyID(pub))
	bounds := append(append([]int{0}, cuts...), len(list))
	table := []byte(`[`)
	manifest := sha256.New()
	for i := 1; i < len(bounds); i++ {
		sum := sha256.Sum256([]byte(list[bounds[i-1]:bounds[i]]))
		if i > 1 {
			table = append(table, ',')
		}
		table = fmt.Appendf(table, `[%d,"%x"]`, bounds[i]-bounds[i-1], sum)
		manifest.Write(binary.BigEndian.AppendUint64(nil, uint64(bounds[i]-bounds[i-1])))
		manifest.Write(sum[:])
	}
	table = append(table, ']')
	msg := append([]byte(Format), 0)
	msg = binary.BigEndian.AppendUint64(msg, v.Epoch)
	msg = binary.BigEndian.AppendUint64(msg, v.Sequence)
	msg = binary.BigEndian.AppendUint64(msg, uint64(t0.UnixNano()))
	msg = manifest.Sum(append(msg, keyID...))
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, msg))
	return fmt.Appendf(nil, `{"format":"%s","epoch":%d,"sequence":%d,"created_at_unix_nano":%d,"key_id":"%x","blocks":%s,"signature":"%s","body":%s}`+"\n",
		Format, v.Epoch, v.Sequence, t0.UnixNano(), keyID, table, sig, list)
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
	l, err := Parse(good, pub)
	if err != nil {
		t.Fatal(err)
	}
	ob, _ := envelope.Open(good, pub, Format, nil)
	sum := hex.EncodeToString(ob.Blocks()[0].Hash[:])
	keyID, otherKeyID := envelope.KeyID(pub), envelope.KeyID(otherPub)
	other := mustBuild(t, sample()[1:], 7, priv)
	v1, err := os.ReadFile(filepath.Join("testdata", "sample.deny.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	// A list of several blocks, and cuts moved off the rule's.
	bigData := mustBuild(t, mixedEntries(rand.New(rand.NewPCG(5, 6)), 3000), 2, priv)
	big, err := Parse(bigData, pub)
	if err != nil {
		t.Fatal(err)
	}
	cuts := big.opened.Cuts()
	if len(cuts) < 2 {
		t.Fatalf("a %d-byte list has %d cuts; the test wants several", len(big.raw), len(cuts))
	}
	next := func(off int) int { return off + bytes.Index(big.raw[off:], []byte(`,{"kind"`)) + 1 }
	lateCuts := append(slices.Clone(cuts[:1]), append([]int{next(cuts[1])}, cuts[2:]...)...)
	midCuts := append(slices.Clone(cuts[:1]), append([]int{cuts[1] + 5}, cuts[2:]...)...)
	extraCuts := append(slices.Clone(cuts[:1]), append([]int{next(cuts[0])}, cuts[1:]...)...)
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
		{"tampered key id", replace(`"key_id":"`+keyID, `"key_id":"`+otherKeyID), pub, ErrSignature},
		{"key id length", replace(`"key_id":"`, `"key_id":"0`), pub, ErrMalformed},
		{"wrong key", good, otherPub, ErrSignature},
		{"no key", good, nil, ErrSignature},
		{"unsigned", bytes.Replace(good, good[bytes.Index(good, []byte(`"signature":"`))+13:bytes.Index(good, []byte(`","body"`))], nil, 1), pub, ErrMalformed},
		{"another file's signature", append(good[:bytes.Index(good, []byte(`"signature":"`))+13:bytes.Index(good, []byte(`"signature":"`))+13],
			append(other[bytes.Index(other, []byte(`"signature":"`))+13:bytes.Index(other, []byte(`","body"`))], good[bytes.Index(good, []byte(`","body"`)):]...)...), pub, ErrSignature},
		{"truncated header", good[:40], pub, ErrMalformed},
		{"truncated list", good[:len(good)-30], pub, ErrMalformed},
		{"truncated last brace", good[:len(good)-2], pub, ErrMalformed},
		{"no final newline", good[:len(good)-1], pub, ErrMalformed},
		{"empty", nil, pub, ErrMalformed},
		{"unknown field", replace(`{"format"`, `{"extra":1,"format"`), pub, ErrMalformed},
		{"unknown field last", replace(`"body":`, `"x":1,"body":`), pub, ErrMalformed},
		{"wrong format", replace(Format, "rampart.deny.v3"), pub, ErrMalformed},
		{"v1 file", v1, pub, ErrMalformed},
		{"epoch 1", resignCut(string(l.raw), nil, envelope.Version{Epoch: 1, Sequence: 7}), pub, ErrMalformed},
		{"one block for a big list", resignCut(string(big.raw), nil, envelope.Version{Sequence: 2}), pub, ErrMalformed},
		{"a cut one record late", resignCut(string(big.raw), lateCuts, envelope.Version{Sequence: 2}), pub, ErrMalformed},
		{"a cut inside a record", resignCut(string(big.raw), midCuts, envelope.Version{Sequence: 2}), pub, ErrMalformed},
		{"an extra cut", resignCut(string(big.raw), extraCuts, envelope.Version{Sequence: 2}), pub, ErrMalformed},
		{"reformatted", pretty.Bytes(), pub, ErrMalformed},
		{"trailing garbage", append(bytes.Clone(good), "garbage"...), pub, ErrMalformed},
		{"trailing object", append(bytes.Clone(good), "{}"...), pub, ErrMalformed},
		{"leading zero", replace(`"sequence":7,`, `"sequence":07,`), pub, ErrMalformed},
		{"upper-case block hash", replace(`","blocks":[[`+strconv.Itoa(len(l.raw))+`,"`+sum[:8], `","blocks":[[`+strconv.Itoa(len(l.raw))+`,"`+strings.ToUpper(sum[:8])), pub, ErrMalformed},
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
	// A v1 file is named as such.
	if _, err := Parse(v1, pub); err == nil || !strings.Contains(err.Error(), "rampart.deny.v1") {
		t.Errorf("v1 file: %v", err)
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
