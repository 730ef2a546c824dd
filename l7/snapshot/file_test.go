package snapshot

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func testKeys(t testing.TB) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func buildValid(t *testing.T, priv ed25519.PrivateKey) []byte {
	t.Helper()
	file, err := Build(loadTestConfig(t, "valid.yaml"), priv, time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	return file
}

func TestBuildAndParseRoundTrip(t *testing.T) {
	priv, pub := testKeys(t)
	file := buildValid(t, priv)
	s, err := Parse(file, pub)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != (Version{3, 14}) {
		t.Errorf("version %s, want 3.14", s.Version)
	}
	if s.KeyID != KeyID(pub) || !s.CreatedAt.Equal(time.Unix(1_800_000_000, 0)) {
		t.Errorf("key id %s created %s", s.KeyID, s.CreatedAt)
	}
	if len(s.Config.Routes) != 4 || s.Config.Routes[2].Host != "api.example.com" {
		t.Errorf("config not round-tripped: %+v", s.Config.Routes)
	}
}

// fixedKey is a key from a fixed seed, for golden files.
func fixedKey(seed byte) (ed25519.PrivateKey, ed25519.PublicKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return priv, priv.Public().(ed25519.PublicKey)
}

func minimalConfig() *Config {
	return &Config{
		Version:   Version{1, 1},
		Listeners: []Listener{{Name: "h", Address: "127.0.0.1:80"}},
		Clusters:  []Cluster{{Name: "c", Endpoints: []Endpoint{{Address: "127.0.0.1:81"}}}},
		Routes:    []Route{{ID: "r", PathTemplate: "/", UpstreamCluster: "c", TimeoutMs: 10, Methods: []string{"GET"}}},
	}
}

// The file format, byte for byte: a minimal config signed by a fixed key
// (Ed25519 signatures are deterministic). go test -update rewrites it.
func TestFileGolden(t *testing.T) {
	priv, pub := fixedKey(7)
	file, err := Build(minimalConfig(), priv, time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "minimal.snap", string(file))
	s, err := Parse(file, pub)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(file), `{"format":"rampart.snapshot.v2","epoch":1,"sequence":1,"created_at_unix_nano":1800000000000000000,"key_id":"`+KeyID(pub)+`","blocks":[[`) {
		t.Errorf("file starts %.200s", file)
	}
	if d, err := FileDigest(file); err != nil || d != s.DigestHex() {
		t.Errorf("FileDigest %s, %v; Parse says %s", d, err, s.DigestHex())
	}
	if v, err := PeekVersion(file); err != nil || v != s.Version {
		t.Errorf("PeekVersion %s, %v", v, err)
	}
}

// A snapshot file of the old format (testdata/v1.snap, written by the v1
// code with key seed 7) is refused with an error naming its format.
func TestOldFormatRefused(t *testing.T) {
	_, pub := fixedKey(7)
	old, err := os.ReadFile("testdata/v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(old, pub)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"rampart.snapshot.v1"`) || !strings.Contains(err.Error(), Format) {
		t.Fatalf("v1 file: %v, want ErrFormat naming rampart.snapshot.v1 and %s", err, Format)
	}
	if _, err := PeekVersion(old); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "rampart.snapshot.v1") {
		t.Errorf("PeekVersion of a v1 file: %v, want ErrMalformed naming its format", err)
	}
}

func TestParseRejectsBadFiles(t *testing.T) {
	priv, pub := testKeys(t)
	_, otherPub := testKeys(t)
	file := buildValid(t, priv)
	s := string(file)
	body := func(old, new string) []byte {
		at := strings.Index(s, `"body":`)
		return []byte(s[:at] + strings.Replace(s[at:], old, new, 1))
	}
	cases := []struct {
		name string
		data []byte
		pub  ed25519.PublicKey
		want error
	}{
		{"truncated", file[:len(file)/2], pub, ErrMalformed},
		{"empty", nil, pub, ErrMalformed},
		{"not json", []byte("hello"), pub, ErrMalformed},
		{"trailing data", append(bytes.Clone(file), []byte(`{"x":1}`)...), pub, ErrMalformed},
		{"whitespace", []byte(strings.Replace(s, `"epoch":3`, `"epoch": 3`, 1)), pub, ErrMalformed},
		{"tampered config", body(`"timeout_ms":2000`, `"timeout_ms":2001`), pub, ErrDigest},
		{"signed by another key", file, otherPub, ErrKeyID},
		{"version raised in envelope", []byte(strings.Replace(s, `"epoch":3,`, `"epoch":9,`, 1)), pub, ErrSignature},
		{"created_at changed", []byte(strings.Replace(s, `"created_at_unix_nano":1800000000000000000`, `"created_at_unix_nano":1`, 1)), pub, ErrSignature},
		{"key_id of another key", []byte(strings.Replace(s, KeyID(pub), KeyID(otherPub), 1)), pub, ErrKeyID},
		{"other format", []byte(strings.Replace(s, Format, "rampart.deny.v2", 1)), pub, ErrFormat},
		{"too large", make([]byte, MaxFileBytes+1), pub, ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data, tc.pub)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
		})
	}
}

// A key_id that is not the verifying key's is refused with both ids named.
func TestParseKeyIDMismatchNamesBothKeys(t *testing.T) {
	priv, pub := testKeys(t)
	file := bytes.Replace(buildValid(t, priv), []byte(KeyID(pub)), []byte("0123456789abcdef"), 1)
	_, err := Parse(file, pub)
	if !errors.Is(err, ErrKeyID) || errors.Is(err, ErrSignature) {
		t.Fatalf("want ErrKeyID (and not ErrSignature), got %v", err)
	}
	for _, id := range []string{"0123456789abcdef", KeyID(pub)} {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("error %q does not name key %s", err, id)
		}
	}
}

// The signed config must be a config of the envelope's version, and
// nothing else.
func TestParseRejectsSignedMismatches(t *testing.T) {
	priv, pub := testKeys(t)
	c := loadTestConfig(t, "valid.yaml")
	canon, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(signRaw(t, priv, Version{3, 15}, canon), pub); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "differs") {
		t.Errorf("config version differs from the envelope's: %v", err)
	}
	extra := append(bytes.TrimSuffix(canon, []byte("}")), []byte(`,"extra":1}`)...)
	if _, err := Parse(signRaw(t, priv, c.Version, extra), pub); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown config field: %v", err)
	}
}

// ParseNext with the snapshot in force hashes only the changed blocks.
func TestParseNextReusesBlocks(t *testing.T) {
	priv, pub := testKeys(t)
	c := minimalConfig()
	for i := 0; i < 3000; i++ {
		c.Routes = append(c.Routes, Route{ID: fmt.Sprintf("r%d", i), Host: fmt.Sprintf("h%d.example.com", i), PathTemplate: "/x",
			UpstreamCluster: "c", TimeoutMs: 10, Methods: []string{"GET"}})
	}
	f1, err := Build(c, priv, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := Parse(f1, pub)
	if err != nil {
		t.Fatal(err)
	}
	blocks := len(s1.opened.Blocks())
	if blocks < 4 {
		t.Fatalf("a %d-byte body got %d blocks", len(s1.Canonical), blocks)
	}
	c.Version.Sequence = 2
	c.Routes[2500].TimeoutMs = 20
	f2, err := Build(c, priv, time.Unix(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := ParseNext(s1, f2, pub)
	if err != nil {
		t.Fatal(err)
	}
	if st := s2.opened.Stat; st.Hashed > 2 || st.Reused < blocks-2 {
		t.Errorf("one route changed: stat %+v of %d blocks", st, blocks)
	}
	if s2.Config.Routes[2500].TimeoutMs != 20 {
		t.Error("the change is not in the parsed config")
	}
}

func TestParseRejectsSignedInvalidConfig(t *testing.T) {
	// A signer that skipped validation cannot get an invalid config past Parse.
	priv, pub := testKeys(t)
	c := loadTestConfig(t, "valid.yaml")
	Normalize(c)
	c.Routes[0].TimeoutMs = 0
	canon, _ := json.Marshal(c)
	file := signRaw(t, priv, c.Version, canon)
	if _, err := Parse(file, pub); !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	if _, err := Parse(file, pub); err == nil || !strings.Contains(err.Error(), "timeout_ms is missing") {
		t.Fatalf("error should name the problem: %v", err)
	}
}

func TestKeyParsingErrors(t *testing.T) {
	privPEM, pubPEM, _ := GenerateKey()
	if _, err := ParsePrivateKey(pubPEM); err == nil {
		t.Error("a public key parsed as a private key")
	}
	if _, err := ParsePublicKey(privPEM); err == nil {
		t.Error("a private key parsed as a public key")
	}
	if _, err := ParsePublicKey([]byte("junk")); err == nil {
		t.Error("junk parsed as a public key")
	}
}

func FuzzParse(f *testing.F) {
	priv, pub := testKeys(f)
	file, err := Build(&Config{
		Version:   Version{1, 1},
		Listeners: []Listener{{Name: "h", Address: "127.0.0.1:80"}},
		Clusters:  []Cluster{{Name: "c", Endpoints: []Endpoint{{Address: "127.0.0.1:81"}}}},
		Routes:    []Route{{ID: "r", PathTemplate: "/", UpstreamCluster: "c", TimeoutMs: 10, Methods: []string{"GET"}}},
	}, priv, time.Unix(1, 0))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file)
	f.Add([]byte(`{"format":"rampart.snapshot.v1"}`))
	if old, err := os.ReadFile("testdata/v1.snap"); err == nil {
		f.Add(old)
	}
	f.Add(bytes.Replace(file, []byte(KeyID(pub)), []byte("0123456789abcdef"), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, pub)
		if err != nil {
			return
		}
		// Anything accepted must be exactly what was signed, by the key
		// it names: the same bytes.
		if s.Version != (Version{1, 1}) || s.KeyID != KeyID(pub) || !bytes.Equal(data, file) {
			t.Fatalf("accepted a file with version %s, key %q: %q", s.Version, s.KeyID, data)
		}
	})
}
