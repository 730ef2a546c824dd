package regionstate

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

func testKey(t testing.TB, seed byte) ed25519.PrivateKey {
	t.Helper()
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func TestBuildParseRoundTrip(t *testing.T) {
	priv := testKey(t, 1)
	pub := priv.Public().(ed25519.PublicKey)
	s := sample()
	file, err := Build(priv, s)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !bytes.Contains(file, []byte(sampleBody)) {
		t.Fatalf("the file does not carry the canonical body:\n%s", file)
	}
	got, err := Parse(file, pub)
	if err != nil {
		t.Fatalf("Parse(Build(sample)): %v", err)
	}
	if !equalState(got, s) {
		t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", got, s)
	}
	again, err := Build(priv, got)
	if err != nil || !bytes.Equal(again, file) {
		t.Fatalf("Build(Parse(f)) differs from f (err %v):\n%s\n%s", err, again, file)
	}
}

func TestBuildSortsAndValidates(t *testing.T) {
	priv := testKey(t, 1)
	s := sample()
	shuffled := *s
	shuffled.Regions = []Region{s.Regions[1], s.Regions[0]}
	shuffled.Platforms = []Platform{s.Platforms[1], s.Platforms[0]}
	shuffled.Platforms[1].Replicas = []Replica{s.Platforms[0].Replicas[1], s.Platforms[0].Replicas[0]}
	a, err := Build(priv, s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(priv, &shuffled)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("Build of a shuffled state differs (err %v)", err)
	}
	if shuffled.Regions[0].Name != "us-east" {
		t.Fatal("Build reordered the caller's regions")
	}
	dup := sample()
	dup.Regions = append(dup.Regions, dup.Regions[0])
	if _, err := Build(priv, dup); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "without duplicates") {
		t.Fatalf("Build with a duplicate region = %v, want ErrInvalid naming it", err)
	}
	if _, err := Build(priv, nil); err == nil {
		t.Fatal("Build(nil) accepted")
	}
	noTime := sample()
	noTime.Created = time.Time{}
	for i := range noTime.Platforms {
		noTime.Platforms[i].Replicas = nil
	}
	f, err := Build(priv, noTime)
	if err != nil {
		t.Fatalf("Build with a zero Created: %v", err)
	}
	got, err := Parse(f, priv.Public().(ed25519.PublicKey))
	if err != nil || time.Since(got.Created) > time.Hour || got.Created.IsZero() {
		t.Fatalf("a zero Created is not filled with now: %v, %v", got, err)
	}
}

// TestParseRefused changes a valid file one way at a time.
func TestParseRefused(t *testing.T) {
	priv := testKey(t, 1)
	pub := priv.Public().(ed25519.PublicKey)
	file, err := Build(priv, sample())
	if err != nil {
		t.Fatal(err)
	}
	other := testKey(t, 2)
	otherFile, err := Build(other, sample())
	if err != nil {
		t.Fatal(err)
	}
	wrongFormat, err := envelope.Seal(priv, "rampart.deny.v9", sample().Version, testCreated, []byte(sampleBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	seal := func(body string) []byte {
		f, err := envelope.Seal(priv, Format, sample().Version, testCreated, []byte(body), nil)
		if err != nil {
			t.Fatalf("seal %q: %v", body, err)
		}
		return f
	}
	zeroVersion, err := envelope.Seal(priv, Format, envelope.Version{}, testCreated, []byte(sampleBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(old, new string) []byte {
		if !bytes.Contains(file, []byte(old)) {
			t.Fatalf("test bug: %q not in the file", old)
		}
		return bytes.Replace(file, []byte(old), []byte(new), 1)
	}
	cases := []struct {
		name string
		file []byte
		pub  ed25519.PublicKey
		want error
	}{
		{"empty", nil, pub, envelope.ErrMalformed},
		{"too large", make([]byte, MaxFileBytes+1), pub, envelope.ErrTooLarge},
		{"wrong key", otherFile, pub, envelope.ErrKeyID},
		{"wrong format", wrongFormat, pub, envelope.ErrFormat},
		{"tampered body", flip(`"lag_ms":250`, `"lag_ms":251`), pub, envelope.ErrDigest},
		{"tampered version", flip(`"sequence":17`, `"sequence":18`), pub, envelope.ErrSignature},
		{"trailing bytes", append(bytes.Clone(file), 'x'), pub, envelope.ErrMalformed},
		{"zero version", zeroVersion, pub, ErrInvalid},
		{"unknown field", seal(strings.Replace(sampleBody, `"draining":false}`, `"draining":false,"x":1}`, 1)), pub, ErrMalformed},
		{"duplicate key", seal(strings.Replace(sampleBody, `"healthy":true,`, `"healthy":true,"healthy":true,`, 1)), pub, ErrMalformed},
		{"bad type", seal(strings.Replace(sampleBody, `"lag_ms":250`, `"lag_ms":"250"`, 1)), pub, ErrMalformed},
		{"invalid state", seal(strings.Replace(sampleBody, `"writer":"eu-west"`, `"writer":"mars"`, 1)), pub, ErrInvalid},
		{"not canonical", seal(strings.Replace(sampleBody, `{"regions":[`, `{"regions": [`, 1)), pub, ErrMalformed},
	}
	for _, c := range cases {
		s, err := Parse(c.file, c.pub)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Parse = %v, %v; want %v", c.name, s, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	priv := testKey(f, 1)
	pub := priv.Public().(ed25519.PublicKey)
	file, err := Build(priv, sample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file)
	f.Add([]byte(sampleBody))
	empty, _ := Build(priv, &State{Version: envelope.Version{Sequence: 1}, Created: testCreated})
	f.Add(empty)
	if ii, err := Build(priv, sampleII()); err == nil {
		f.Add(ii)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, pub)
		if err != nil {
			return
		}
		again, err := Build(priv, s)
		if err != nil {
			t.Fatalf("Build of an accepted state: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted a file Build does not write:\n got %q\nwant %q", data, again)
		}
	})
}

// FuzzBody reaches the body decoder directly (a fuzzer cannot sign).
func FuzzBody(f *testing.F) {
	f.Add([]byte(sampleBody))
	f.Add([]byte(`{"regions":[],"platforms":[]}`))
	f.Add([]byte(sampleIIBody))
	f.Add([]byte(`{"regions":[{"name":"a","healthy":true,"config_version":{"epoch":0,"sequence":0},"draining":false}],"platforms":[]}`))
	v := sample().Version
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := decodeBody(body, v, testCreated)
		if err != nil {
			return
		}
		if again := encodeBody(nil, s); !bytes.Equal(again, body) {
			t.Fatalf("accepted a body encodeBody does not write:\n got %q\nwant %q", body, again)
		}
	})
}
