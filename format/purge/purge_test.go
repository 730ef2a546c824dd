package purge

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

func keys(t testing.TB) (ed25519.PrivateKey, ed25519.PublicKey) {
	privPEM, pubPEM, err := envelope.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := envelope.ParsePrivateKey(privPEM)
	pub, _ := envelope.ParsePublicKey(pubPEM)
	return priv, pub
}

func TestBuildParseRoundTrip(t *testing.T) {
	priv, pub := keys(t)
	at := time.Unix(1800000000, 5)
	d := Append(nil, at, "pages", "", "")
	d = Append(d, at, "", "example.com/blog/", "")
	d = Append(d, at, "", "", "post-42")
	if d.Version != (envelope.Version{Epoch: 1, Sequence: 3}) || len(d.Rules) != 3 || d.Rules[2].ID != 3 {
		t.Fatalf("append: %+v", d)
	}
	file, err := Build(priv, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(file, pub)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != d.Version || len(got.Rules) != 3 || got.Rules[1].Prefix != "example.com/blog/" || !got.Rules[0].At().Equal(at) {
		t.Fatalf("parsed %+v", got)
	}
	again, err := Build(priv, &Document{Version: got.Version, Created: got.Created, Rules: got.Rules})
	if err != nil || string(again) != string(file) {
		t.Fatalf("Build(Parse(f)) != f: %v", err)
	}
	_, otherPub := keys(t)
	if _, err := Parse(file, otherPub); !errors.Is(err, envelope.ErrKeyID) {
		t.Fatalf("other key: %v", err)
	}
}

func TestDecodeBodyRefuses(t *testing.T) {
	cases := map[string]string{
		`{"rules":[]} `: "not canonical",
		`{"rules":[{"id":1,"at_unix_nano":1,"route":"r"}],"x":1}`: "unknown field",
		`{}`: "rules are missing",
		`{"rules":[{"id":0,"at_unix_nano":1,"route":"r"}]}`:                                               "id 0",
		`{"rules":[{"id":2,"at_unix_nano":1,"route":"r"},{"id":2,"at_unix_nano":1,"route":"r"}]}`:         "ids must increase",
		`{"rules":[{"id":1,"at_unix_nano":0,"route":"r"}]}`:                                               "not a time",
		`{"rules":[{"id":1,"at_unix_nano":1}]}`:                                                           "no selector",
		`{"rules":[{"id":1,"at_unix_nano":1,"route":""}]}`:                                                "no selector",
		`{"rules":[{"at_unix_nano":1,"id":1,"route":"r"}]}`:                                               "not canonical",
		`{"rules":[{"id":1,"at_unix_nano":1,"route":"` + strings.Repeat("a", MaxSelectorBytes+1) + `"}]}`: "longer than",
		`{"rules":[]}{}`: "bytes after",
	}
	for in, want := range cases {
		_, err := DecodeBody([]byte(in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60s: error %v, want %q", in, err, want)
		}
	}
	if _, err := DecodeBody([]byte(`{"rules":[{"id":1,"at_unix_nano":1,"route":"r"}]}`)); err != nil {
		t.Fatal(err)
	}
}

func TestAppendKeepsTheNewestRules(t *testing.T) {
	var d *Document
	for i := 0; i < MaxRules+5; i++ {
		d = Append(d, time.Unix(1, 0), "r", "", "")
	}
	if len(d.Rules) != MaxRules || d.Rules[0].ID != 6 || d.Validate() != nil {
		t.Fatalf("rules %d, first %d", len(d.Rules), d.Rules[0].ID)
	}
}

func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`{"rules":[]}`))
	f.Add([]byte(`{"rules":[{"id":1,"at_unix_nano":1,"route":"r","prefix":"h/p","surrogate_key":"k"}]}`))
	f.Add([]byte(`{"rules":[{"id":1,"at_unix_nano":1}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := DecodeBody(body)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		canon, err := encodeBody(d)
		if err != nil || string(canon) != string(body) {
			t.Fatalf("accepted a body that does not re-encode to itself: %q", body)
		}
	})
}
