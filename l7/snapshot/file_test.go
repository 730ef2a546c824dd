package snapshot

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
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

// mutateEnvelope decodes a file, lets f change it, and re-encodes it.
func mutateEnvelope(t *testing.T, file []byte, f func(m map[string]json.RawMessage)) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(file, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseRejectsBadFiles(t *testing.T) {
	priv, pub := testKeys(t)
	_, otherPub := testKeys(t)
	file := buildValid(t, priv)
	cases := []struct {
		name string
		data []byte
		pub  ed25519.PublicKey
		want error
	}{
		{"truncated", file[:len(file)/2], pub, ErrMalformed},
		{"empty", nil, pub, ErrMalformed},
		{"not json", []byte("hello"), pub, ErrMalformed},
		{"trailing data", append(bytes.TrimSpace(append([]byte{}, file...)), []byte(`{"x":1}`)...), pub, ErrMalformed},
		{"tampered config", bytes.Replace(file, []byte(`"timeout_ms":2000`), []byte(`"timeout_ms":2001`), 1), pub, ErrDigest},
		{"tampered config with matching digest", func() []byte {
			return mutateEnvelope(t, file, func(m map[string]json.RawMessage) {
				cfg := bytes.Replace(m["config"], []byte(`"timeout_ms":2000`), []byte(`"timeout_ms":2001`), 1)
				m["config"] = cfg
				m["sha256"] = json.RawMessage(`"` + hexSHA(cfg) + `"`)
			})
		}(), pub, ErrSignature},
		{"unsigned", mutateEnvelope(t, file, func(m map[string]json.RawMessage) { m["signature"] = json.RawMessage(`""`) }), pub, ErrSignature},
		{"signed by another key", file, otherPub, ErrSignature},
		{"version raised in envelope", mutateEnvelope(t, file, func(m map[string]json.RawMessage) {
			m["version"] = json.RawMessage(`{"epoch":9,"sequence":1}`)
		}), pub, ErrSignature},
		{"created_at changed", mutateEnvelope(t, file, func(m map[string]json.RawMessage) {
			m["created_at_unix_nano"] = json.RawMessage(`1`)
		}), pub, ErrSignature},
		{"key_id of another key", mutateEnvelope(t, file, func(m map[string]json.RawMessage) {
			m["key_id"] = json.RawMessage(`"` + KeyID(otherPub) + `"`)
		}), pub, ErrKeyID},
		{"key_id missing", mutateEnvelope(t, file, func(m map[string]json.RawMessage) { delete(m, "key_id") }), pub, ErrKeyID},
		{"unknown format", mutateEnvelope(t, file, func(m map[string]json.RawMessage) { m["format"] = json.RawMessage(`"v0"`) }), pub, ErrMalformed},
		{"unknown envelope field", mutateEnvelope(t, file, func(m map[string]json.RawMessage) { m["extra"] = json.RawMessage(`1`) }), pub, ErrMalformed},
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
	file := mutateEnvelope(t, buildValid(t, priv), func(m map[string]json.RawMessage) { m["key_id"] = json.RawMessage(`"0123456789abcdef"`) })
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
	f.Add(bytes.Replace(file, []byte(KeyID(pub)), []byte("0123456789abcdef"), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, pub)
		if err != nil {
			return
		}
		// Anything accepted must be exactly what was signed, by the key
		// it names.
		if s.Version != (Version{1, 1}) || s.KeyID != KeyID(pub) {
			t.Fatalf("accepted a file with version %s, key %q", s.Version, s.KeyID)
		}
	})
}
