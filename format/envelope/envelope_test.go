package envelope

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const testFormat = "rampart.test.v1"

// testKey is a fixed key, so that sealing the same input twice gives the
// same bytes (Ed25519 signatures are deterministic).
func testKey(seed byte) (ed25519.PrivateKey, ed25519.PublicKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return priv, priv.Public().(ed25519.PublicKey)
}

var testCreated = time.Unix(1700000000, 123456789)

func seal(t testing.TB, body string, cuts ...int) []byte {
	t.Helper()
	priv, _ := testKey(1)
	f, err := Seal(priv, testFormat, Version{Epoch: 3, Sequence: 42}, testCreated, []byte(body), cuts)
	if err != nil {
		t.Fatalf("Seal(%q, cuts %v): %v", body, cuts, err)
	}
	return f
}

const testBody = `{"a":[1,2,3],"b":"hello","c":{"d":null}}`

func TestRoundTrip(t *testing.T) {
	_, pub := testKey(1)
	for _, cuts := range [][]int{nil, {1}, {5, 6, 20}, {len(testBody) - 1}} {
		f := seal(t, testBody, cuts...)
		if bytes.Count(f, []byte("\n")) != 1 || f[len(f)-1] != '\n' {
			t.Fatalf("cuts %v: file is not one line: %q", cuts, f)
		}
		o, err := Open(f, pub, testFormat, nil)
		if err != nil {
			t.Fatalf("cuts %v: Open: %v", cuts, err)
		}
		if o.Format != testFormat || o.Version != (Version{3, 42}) || !o.Created.Equal(testCreated) || o.KeyID != KeyID(pub) {
			t.Errorf("cuts %v: opened %s %v %v %s", cuts, o.Format, o.Version, o.Created, o.KeyID)
		}
		if string(o.Body()) != testBody {
			t.Errorf("cuts %v: body %q", cuts, o.Body())
		}
		if !slices.Equal(o.Cuts(), cuts) && !(len(cuts) == 0 && len(o.Cuts()) == 0) {
			t.Errorf("cuts %v: Cuts() = %v", cuts, o.Cuts())
		}
		blocks := o.Blocks()
		if len(blocks) != len(cuts)+1 || o.Stat.Hashed != len(blocks) || o.Stat.Reused != 0 || o.Stat.HashedBytes != int64(len(testBody)) {
			t.Errorf("cuts %v: %d blocks, stat %+v", cuts, len(blocks), o.Stat)
		}
		// The body is a slice of the file, not a copy.
		if &o.Body()[0] != &f[len(f)-2-len(testBody)] {
			t.Errorf("cuts %v: Body() is not a slice of the file", cuts)
		}
		again, err := Seal(testPriv(), o.Format, o.Version, o.Created, o.Body(), o.Cuts())
		if err != nil || !bytes.Equal(again, f) {
			t.Errorf("cuts %v: re-seal differs (%v):\n%s\n%s", cuts, err, again, f)
		}
	}
	want := fmt.Sprintf(`{"format":"rampart.test.v1","epoch":3,"sequence":42,"created_at_unix_nano":1700000000123456789,"key_id":"%s","blocks":[[5,"`, KeyID(testPub()))
	if f := seal(t, testBody, 5); !strings.HasPrefix(string(f), want) {
		t.Errorf("file starts %.160s, want %s", f, want)
	}
}

func testPriv() ed25519.PrivateKey { p, _ := testKey(1); return p }
func testPub() ed25519.PublicKey   { _, p := testKey(1); return p }

func TestSealRefuses(t *testing.T) {
	priv := testPriv()
	v := Version{1, 1}
	for _, c := range []struct {
		name, format, body string
		cuts               []int
	}{
		{"empty body", testFormat, "", nil},
		{"not JSON", testFormat, `{"a":`, nil},
		{"newline", testFormat, "{\n}", nil},
		{"cut at 0", testFormat, testBody, []int{0}},
		{"cut at end", testFormat, testBody, []int{len(testBody)}},
		{"cuts not rising", testFormat, testBody, []int{4, 4}},
		{"cuts falling", testFormat, testBody, []int{6, 3}},
		{"empty format", "", testBody, nil},
		{"format with a quote", `a"b`, testBody, nil},
		{"long format", strings.Repeat("a", MaxFormatLen+1), testBody, nil},
	} {
		if f, err := Seal(priv, c.format, v, testCreated, []byte(c.body), c.cuts); err == nil {
			t.Errorf("%s: Seal wrote %q", c.name, f)
		}
	}
	if _, err := Seal(priv[:10], testFormat, v, testCreated, []byte(testBody), nil); err == nil {
		t.Error("Seal took a 10-byte private key")
	}
}

// TestTamper changes each kind of byte in a file and checks Open refuses
// it with the sentinel for that kind.
func TestTamper(t *testing.T) {
	f := string(seal(t, testBody, 10, 20))
	_, pub := testKey(1)
	o, err := Open([]byte(f), pub, testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := o.Blocks()
	kid := KeyID(pub)
	otherKid := KeyID(ed25519.PublicKey(bytes.Repeat([]byte{9}, 32)))
	hash0 := fmt.Sprintf("%x", b[0].Hash)
	flipHex := func(h string) string {
		if h[0] == '0' {
			return "1" + h[1:]
		}
		return "0" + h[1:]
	}
	sigAt := strings.Index(f, `"signature":"`) + len(`"signature":"`)
	sig := f[sigAt : sigAt+88]
	otherSig := strings.Replace(sig, sig[:1], map[bool]string{true: "B", false: "A"}[sig[0] == 'A'], 1)
	bodyAt := strings.Index(f, `"body":`) + len(`"body":`)
	cases := []struct {
		name string
		file string
		want error
	}{
		// framing
		{"space after colon", strings.Replace(f, `"epoch":3`, `"epoch": 3`, 1), ErrMalformed},
		{"leading zero", strings.Replace(f, `"epoch":3`, `"epoch":03`, 1), ErrMalformed},
		{"plus sign", strings.Replace(f, `"sequence":42`, `"sequence":+42`, 1), ErrMalformed},
		{"negative zero", strings.Replace(f, `"created_at_unix_nano":1700000000123456789`, `"created_at_unix_nano":-0`, 1), ErrMalformed},
		{"epoch overflow", strings.Replace(f, `"epoch":3`, `"epoch":18446744073709551616`, 1), ErrMalformed},
		{"fields swapped", strings.Replace(f, `"epoch":3,"sequence":42`, `"sequence":42,"epoch":3`, 1), ErrMalformed},
		{"upper-case key id", strings.Replace(f, kid, strings.ToUpper(kid), 1), ErrMalformed},
		{"upper-case block hash", strings.Replace(f, hash0, strings.ToUpper(hash0), 1), ErrMalformed},
		{"unpadded signature", strings.Replace(f, sig, strings.TrimRight(sig, "="), 1), ErrMalformed},
		{"no final newline", strings.TrimSuffix(f, "\n"), ErrMalformed},
		{"trailing data", f + "x", ErrMalformed},
		{"CRLF", strings.TrimSuffix(f, "\n") + "\r\n", ErrMalformed},
		{"empty", "", ErrMalformed},
		{"truncated", f[:len(f)/2], ErrMalformed},
		{"body longer than blocks", f[:bodyAt] + " " + f[bodyAt:], ErrMalformed},
		{"body shorter than blocks", f[:bodyAt] + f[bodyAt+1:], ErrMalformed},
		{"zero-length block", strings.Replace(f, `"blocks":[`, `"blocks":[[0,"`+hash0+`"],`, 1), ErrMalformed},
		{"block lengths not tiling", strings.Replace(f, `"blocks":[[10,`, `"blocks":[[11,`, 1), ErrMalformed},
		{"no blocks", f[:strings.Index(f, `"blocks":[`)+len(`"blocks":[`)] + f[strings.Index(f, `],"signature"`):], ErrMalformed},
		// format
		{"other format", strings.Replace(f, testFormat, "rampart.test.v2", 1), ErrFormat},
		// version and created: covered by the signature
		{"epoch", strings.Replace(f, `"epoch":3`, `"epoch":4`, 1), ErrSignature},
		{"sequence", strings.Replace(f, `"sequence":42`, `"sequence":43`, 1), ErrSignature},
		{"created", strings.Replace(f, `"created_at_unix_nano":1700000000123456789`, `"created_at_unix_nano":1700000000123456780`, 1), ErrSignature},
		// key id
		{"key id", strings.Replace(f, kid, otherKid, 1), ErrKeyID},
		// block table
		{"block hash", strings.Replace(f, hash0, flipHex(hash0), 1), ErrSignature},
		{"block boundary moved", strings.Replace(strings.Replace(f, `"blocks":[[10,`, `"blocks":[[11,`, 1), `],[10,`, `],[9,`, 1), ErrSignature},
		// signature
		{"signature", strings.Replace(f, sig, otherSig, 1), ErrSignature},
		// body
		{"body byte", f[:bodyAt+3] + "b" + f[bodyAt+4:], ErrDigest},
	}
	for _, c := range cases {
		if c.file == f {
			t.Fatalf("%s: the tamper changed nothing", c.name)
		}
		_, err := Open([]byte(c.file), pub, testFormat, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Open = %v, want %v", c.name, err, c.want)
		}
		// With the original as prev, the answer is the same.
		_, err = Open([]byte(c.file), pub, testFormat, o)
		if !errors.Is(err, c.want) {
			t.Errorf("%s with prev: Open = %v, want %v", c.name, err, c.want)
		}
	}
}

// TestEveryByteFlipRefused changes each byte of a file in turn: none of the
// results opens, and each error is one of the sentinels.
func TestEveryByteFlipRefused(t *testing.T) {
	f := seal(t, testBody, 7, 19)
	_, pub := testKey(1)
	prev, err := Open(f, pub, testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[error]int{}
	for i := range f {
		for _, x := range []byte{0x01, 0x20, 0x80} {
			g := bytes.Clone(f)
			g[i] ^= x
			_, err := Open(g, pub, testFormat, prev)
			if err == nil {
				t.Fatalf("byte %d ^ %#x: accepted", i, x)
			}
			found := false
			for _, s := range []error{ErrMalformed, ErrFormat, ErrKeyID, ErrSignature, ErrDigest} {
				if errors.Is(err, s) {
					counts[s]++
					found = true
				}
			}
			if !found {
				t.Fatalf("byte %d ^ %#x: error %v matches no sentinel", i, x, err)
			}
		}
	}
	for _, s := range []error{ErrMalformed, ErrFormat, ErrKeyID, ErrSignature, ErrDigest} {
		if counts[s] == 0 {
			t.Errorf("no flip gave %v (counts %v)", s, counts)
		}
	}
}

func TestWrongKeyFormatSize(t *testing.T) {
	f := seal(t, testBody)
	_, other := testKey(2)
	if _, err := Open(f, other, testFormat, nil); !errors.Is(err, ErrKeyID) {
		t.Errorf("other key: %v, want ErrKeyID", err)
	}
	// A file signed by key 2 whose key_id is made to name key 1.
	priv2, _ := testKey(2)
	g, err := Seal(priv2, testFormat, Version{3, 42}, testCreated, []byte(testBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	g = bytes.Replace(g, []byte(KeyID(other)), []byte(KeyID(testPub())), 1)
	if _, err := Open(g, testPub(), testFormat, nil); !errors.Is(err, ErrSignature) {
		t.Errorf("key id relabelled: %v, want ErrSignature", err)
	}
	_, err = Open(f, testPub(), "rampart.other.v1", nil)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"rampart.test.v1"`) {
		t.Errorf("wrong format: %v, want ErrFormat naming the file's format", err)
	}
	// A file of another shape altogether (an older envelope) names its format.
	old := []byte(`{"format":"rampart.snapshot.v1","version":{"epoch":1,"sequence":2},"config":{}}` + "\n")
	_, err = Open(old, testPub(), "rampart.snapshot.v2", nil)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"rampart.snapshot.v1"`) {
		t.Errorf("old file: %v, want ErrFormat naming rampart.snapshot.v1", err)
	}
	if _, err := OpenLimit(f, testPub(), testFormat, nil, len(f)-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v, want ErrTooLarge", err)
	}
	if _, err := OpenLimit(f, testPub(), testFormat, nil, len(f)); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	if _, err := Open(f, testPub()[:5], testFormat, nil); err == nil {
		t.Error("a 5-byte public key verified a file")
	}
}

// bigBody is a JSON array of n strings, each 100 bytes with its quotes and
// comma, cut every 1000 bytes: every block but the first and last is
// ,"…",…"…" so interior blocks may be swapped and stay JSON.
func bigBody(n int) ([]byte, []int) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", fmt.Sprintf("%097d", i))
	}
	b.WriteByte(']')
	var cuts []int
	for c := 1000; c < b.Len(); c += 1000 {
		cuts = append(cuts, c)
	}
	return b.Bytes(), cuts
}

func TestIncrementalOpen(t *testing.T) {
	priv, pub := testKey(1)
	body, cuts := bigBody(500)
	nblocks := len(cuts) + 1
	f1, err := Seal(priv, testFormat, Version{1, 1}, testCreated, body, cuts)
	if err != nil {
		t.Fatal(err)
	}
	o1, err := Open(f1, pub, testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o1.Stat.Hashed != nblocks || o1.Stat.Reused != 0 {
		t.Fatalf("first open: stat %+v, want %d hashed", o1.Stat, nblocks)
	}

	// The same document again, in a new buffer: nothing is hashed.
	o, err := Open(bytes.Clone(f1), pub, testFormat, o1)
	if err != nil {
		t.Fatal(err)
	}
	if o.Stat.Hashed != 0 || o.Stat.Reused != nblocks || o.Stat.ReusedBytes != int64(len(body)) {
		t.Errorf("unchanged: stat %+v, want all %d reused", o.Stat, nblocks)
	}

	// One byte changed in block 7: only that block is hashed.
	body2 := bytes.Clone(body)
	body2[7*1000+450] ^= 1 // a digit inside a string (stride 100, +1 for "["): still JSON
	f2, err := Seal(priv, testFormat, Version{1, 2}, testCreated, body2, cuts)
	if err != nil {
		t.Fatal(err)
	}
	o2, err := Open(f2, pub, testFormat, o1)
	if err != nil {
		t.Fatal(err)
	}
	if o2.Stat.Hashed != 1 || o2.Stat.Reused != nblocks-1 || o2.Stat.HashedBytes != 1000 {
		t.Errorf("one block changed: stat %+v, want 1 hashed", o2.Stat)
	}
	if !bytes.Equal(o2.Body(), body2) {
		t.Error("one block changed: body differs")
	}

	// Blocks moved: found by hash, not by place.
	swapped := slices.Concat(body[:1000], body[2000:3000], body[1000:2000], body[3000:])
	f3, err := Seal(priv, testFormat, Version{1, 3}, testCreated, swapped, cuts)
	if err != nil {
		t.Fatal(err)
	}
	o3, err := Open(f3, pub, testFormat, o1)
	if err != nil {
		t.Fatal(err)
	}
	if o3.Stat.Hashed != 0 {
		t.Errorf("two blocks swapped: stat %+v, want none hashed", o3.Stat)
	}

	// A file whose block 7 claims its old hash but holds other bytes: the
	// table and signature are the original's, the bytes are not.
	forged := bytes.Clone(f1)
	at := len(forged) - 2 - len(body) + 7*1000 + 450
	forged[at] ^= 1
	if _, err := Open(forged, pub, testFormat, o1); !errors.Is(err, ErrDigest) {
		t.Errorf("block claiming its old hash with new bytes: %v, want ErrDigest", err)
	}
	// And a block whose bytes are another old block's, under its own old
	// hash: hashed (the bytes differ from the block the hash names), refused.
	forged = bytes.Clone(f1)
	start := len(forged) - 2 - len(body)
	copy(forged[start+7*1000:start+8*1000], body[8*1000:9*1000])
	if _, err := Open(forged, pub, testFormat, o1); !errors.Is(err, ErrDigest) {
		t.Errorf("block holding another block's bytes: %v, want ErrDigest", err)
	}
	// prev of another key still serves as a cache of hashed bytes: the
	// relation bytes -> hash does not depend on who signed.
	priv2, pub2 := testKey(2)
	f4, err := Seal(priv2, testFormat, Version{1, 4}, testCreated, body2, cuts)
	if err != nil {
		t.Fatal(err)
	}
	o4, err := Open(f4, pub2, testFormat, o2)
	if err != nil || o4.Stat.Hashed != 0 {
		t.Errorf("other key, same body: %v, stat %+v", err, o4)
	}
}

func TestPeek(t *testing.T) {
	f := seal(t, testBody, 4)
	h, err := Peek(f)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Open(f, testPub(), testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Format != testFormat || h.Version != o.Version || !h.Created.Equal(o.Created) || h.KeyID != o.KeyID || h.Manifest != o.Manifest {
		t.Errorf("Peek %+v differs from Open %+v", h, o)
	}
	if _, err := Peek(f[:40]); !errors.Is(err, ErrMalformed) {
		t.Errorf("Peek of a truncated file: %v", err)
	}
}
