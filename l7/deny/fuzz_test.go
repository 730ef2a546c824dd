package deny

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// FuzzParse: Parse never panics, and whatever it accepts is JSON that the
// envelope verifies, whose entries re-encode to its body and whose cuts
// are the rule's, and which re-seals to the same bytes.
func FuzzParse(f *testing.F) {
	priv, pub := testKey(1)
	good := mustBuild(f, sample(), 9, priv)
	f.Add(good)
	f.Add(mustBuild(f, nil, 1, priv))
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"format":"rampart.deny.v2","epoch":0,"sequence":1}`))
	if v1, err := os.ReadFile("testdata/sample.deny.v1.json"); err == nil {
		f.Add(v1)
	}
	if golden, err := os.ReadFile("testdata/sample.deny.json"); err == nil {
		f.Add(golden)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(data, pub)
		if err != nil {
			return
		}
		var env struct {
			Format    string            `json:"format"`
			Epoch     uint64            `json:"epoch"`
			Sequence  uint64            `json:"sequence"`
			Created   int64             `json:"created_at_unix_nano"`
			KeyID     string            `json:"key_id"`
			Blocks    []json.RawMessage `json:"blocks"`
			Signature string            `json:"signature"`
			Body      json.RawMessage   `json:"body"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env); err != nil || dec.More() {
			t.Fatalf("accepted, but encoding/json says: %v", err)
		}
		o, err := envelope.Open(data, pub, Format, nil)
		if err != nil || env.Format != Format || env.Epoch != 0 || env.Sequence != l.Sequence() ||
			env.Created != l.CreatedAt().UnixNano() || hex.EncodeToString(o.Manifest[:]) != l.DigestHex() {
			t.Fatalf("accepted a file that does not verify (%v): %s", err, data)
		}
		cuts := checkListAgainstJSON(t, env.Body, l)
		if !slices.Equal(cuts, o.Cuts()) {
			t.Fatalf("accepted cuts %v, the rule gives %v", o.Cuts(), cuts)
		}
		again, err := seal(env.Body, cuts, env.Sequence, priv, env.Created)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("accepted a file that does not re-seal to the same bytes (%v)", err)
		}
	})
}

// FuzzDecodeList: the list decoder never panics, and what it accepts is
// JSON with the same entries, which Build would encode to the same bytes;
// the CIDRs it streams are the list's CIDRs, in order.
func FuzzDecodeList(f *testing.F) {
	exp := `"expires_at":"2030-01-02T04:04:05Z"`
	for _, s := range []string{
		`{"entries":[]}`,
		`{"entries":[{"kind":"jti","value":"a\"b\\c",` + exp + `,"reason":"r"}]}`,
		`{"entries":[{"kind":"cidr","value":"10.0.0.0/8",` + exp + `},{"kind":"cidr","value":"10.1.0.0/16",` + exp + `}]}`,
		`{"entries":[{"kind":"cidr","value":"2001:db8::/32",` + exp + `},{"kind":"tenant","value":"t",` + exp + `}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var streamed []netip.Prefix
		l, err := decodeList(b, nil, func(p netip.Prefix, exp int64) {
			if exp > 0 {
				streamed = append(streamed, p)
			}
		})
		if err != nil {
			return
		}
		checkListAgainstJSON(t, b, l)
		if want := l.CIDRs(time.Unix(0, 0)); !slices.Equal(streamed, want) {
			t.Fatalf("streamed CIDRs %v, the list's are %v", streamed, want)
		}
	})
}

// checkListAgainstJSON decodes list bytes with encoding/json and checks
// that l holds the same entries and that they re-encode to the same bytes;
// it returns the cuts the rule gives them.
func checkListAgainstJSON(t *testing.T, list []byte, l *List) []int {
	var src struct {
		Entries []struct {
			Kind      Kind   `json:"kind"`
			Value     string `json:"value"`
			ExpiresAt string `json:"expires_at"`
			Reason    string `json:"reason"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(list, &src); err != nil {
		t.Fatalf("accepted, but encoding/json says: %v", err)
	}
	if len(src.Entries) != l.Len() {
		t.Fatalf("%d entries, encoding/json sees %d", l.Len(), len(src.Entries))
	}
	var ns []norm
	for _, e := range src.Entries {
		exp, err := time.Parse(time.RFC3339, e.ExpiresAt)
		if err != nil {
			t.Fatalf("accepted expiry %q: %v", e.ExpiresAt, err)
		}
		n, err := normalize(Entry{Kind: e.Kind, Value: e.Value, ExpiresAt: exp, Reason: e.Reason})
		if err != nil {
			t.Fatalf("accepted an entry normalize refuses: %v", err)
		}
		ns = append(ns, n)
		reason := e.Reason
		if reason == "" {
			reason = string(e.Kind)
		}
		before := time.Unix(n.exp-1, 0)
		var got string
		var denied bool
		switch e.Kind {
		case KindCIDR:
			got, denied = l.CheckIP(n.pfx.Addr(), before)
			reason = "" // a longer prefix may answer first; check only the match
		case KindAPIKeyID:
			got, denied = l.Check(Query{KeyID: e.Value}, before)
		case KindJTI:
			got, denied = l.Check(Query{JTI: e.Value}, before)
		case KindSubject:
			got, denied = l.Check(Query{Subject: e.Value}, before)
		case KindTenant:
			got, denied = l.Check(Query{Tenant: e.Value}, before)
		}
		if !denied || reason != "" && got != reason {
			t.Fatalf("entry %+v: Check = %q, %v", e, got, denied)
		}
	}
	out, cuts := encodeList(ns)
	if !bytes.Equal(out, list) {
		t.Fatalf("accepted non-canonical bytes:\n%s\nre-encoded:\n%s", list, out)
	}
	return cuts
}
