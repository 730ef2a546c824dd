package regionstate

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

// sampleII is sample with the Regions II additions: two sites and three
// quota leases.
func sampleII() *State {
	s := sample()
	rep := testCreated.Add(-time.Second)
	exp := testCreated.Add(10 * time.Second)
	s.Sites = []Site{
		{Name: "fra-1", Region: "eu-west", Announcing: []string{"192.0.2.0/24", "2001:db8::/48"}, ReportedAt: rep},
		{Name: "iad-1", Region: "us-east", Announcing: []string{}, ReportedAt: rep.Add(-time.Second)},
	}
	s.QuotaLeases = []QuotaLease{
		{Policy: "api-global", Region: "eu-west", PerSecond: 300000, Burst: 30000, Nodes: 4, Expires: exp},
		{Policy: "api-global", Region: "us-east", PerSecond: 200000, Burst: 20000, Expires: exp},
		{Policy: "login", Region: "eu-west", PerSecond: 50, Burst: 10, Expires: exp},
	}
	return s
}

var sampleIIBody = strings.TrimSuffix(sampleBody, "}") +
	`,"sites":[` +
	`{"name":"fra-1","region":"eu-west","announcing":["192.0.2.0/24","2001:db8::/48"],"reported_at_unix_nano":1796183999000000000},` +
	`{"name":"iad-1","region":"us-east","announcing":[],"reported_at_unix_nano":1796183998000000000}],` +
	`"quota_leases":[` +
	`{"policy":"api-global","region":"eu-west","per_second":300000,"burst":30000,"nodes":4,"expires_unix_nano":1796184010000000000},` +
	`{"policy":"api-global","region":"us-east","per_second":200000,"burst":20000,"nodes":0,"expires_unix_nano":1796184010000000000},` +
	`{"policy":"login","region":"eu-west","per_second":50,"burst":10,"nodes":0,"expires_unix_nano":1796184010000000000}]}`

func TestSitesLeasesBody(t *testing.T) {
	s := sampleII()
	body := encodeBody(nil, s)
	if string(body) != sampleIIBody {
		t.Fatalf("encodeBody:\n got %s\nwant %s", body, sampleIIBody)
	}
	back, err := decodeBody(body, s.Version, s.Created)
	if err != nil {
		t.Fatalf("decodeBody: %v", err)
	}
	if !equalState(back, s) {
		t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", back, s)
	}
	// Only sites, or only leases: the other key is left out.
	onlySites := sampleII()
	onlySites.QuotaLeases = nil
	if b := encodeBody(nil, onlySites); bytes.Contains(b, []byte("quota_leases")) || !bytes.Contains(b, []byte(`"sites":[`)) {
		t.Fatalf("sites only: %s", b)
	}
	onlyLeases := sampleII()
	onlyLeases.Sites = []Site{}
	b := encodeBody(nil, onlyLeases)
	if bytes.Contains(b, []byte("sites")) {
		t.Fatalf("leases only: %s", b)
	}
	if _, err := decodeBody(b, s.Version, s.Created); err != nil {
		t.Fatalf("decodeBody(leases only): %v", err)
	}
}

func TestSitesLeasesBuildParse(t *testing.T) {
	priv := testKey(t, 2)
	s := sampleII()
	shuffled := *s
	shuffled.Sites = []Site{s.Sites[1], {Name: "fra-1", Region: "eu-west", Announcing: []string{"2001:db8::/48", "192.0.2.0/24"}, ReportedAt: s.Sites[0].ReportedAt}}
	shuffled.QuotaLeases = []QuotaLease{s.QuotaLeases[2], s.QuotaLeases[1], s.QuotaLeases[0]}
	a, err := Build(priv, s)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	b, err := Build(priv, &shuffled)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("Build of a shuffled state differs (err %v)", err)
	}
	if shuffled.Sites[1].Announcing[0] != "2001:db8::/48" || shuffled.QuotaLeases[0].Policy != "login" {
		t.Fatal("Build reordered the caller's slices")
	}
	got, err := Parse(a, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !equalState(got, s) {
		t.Fatalf("Parse(Build(s)) = %+v", got)
	}
	if st, ok := got.Site("fra-1"); !ok || st.Region != "eu-west" || len(st.Announcing) != 2 {
		t.Fatalf(`Site("fra-1") = %+v, %v`, st, ok)
	}
	if _, ok := got.Site("sin-1"); ok {
		t.Fatal(`Site("sin-1") found`)
	}
	if l, ok := got.QuotaLease("api-global", "us-east"); !ok || l.PerSecond != 200000 {
		t.Fatalf(`QuotaLease("api-global", "us-east") = %+v, %v`, l, ok)
	}
	if _, ok := got.QuotaLease("login", "us-east"); ok {
		t.Fatal(`QuotaLease("login", "us-east") found`)
	}
	var none *State
	if _, ok := none.Site("fra-1"); ok {
		t.Fatal("nil state found a site")
	}
	if _, ok := none.QuotaLease("login", "eu-west"); ok {
		t.Fatal("nil state found a lease")
	}
	if n := testing.AllocsPerRun(100, func() { got.Site("iad-1"); got.QuotaLease("login", "eu-west") }); n != 0 {
		t.Fatalf("lookups allocate %v times", n)
	}
}

func TestSitesLeasesRefused(t *testing.T) {
	repl := func(old, new string) string {
		if !strings.Contains(sampleIIBody, old) {
			t.Fatalf("test bug: %q not in the sample body", old)
		}
		return strings.Replace(sampleIIBody, old, new, 1)
	}
	cases := []struct {
		name, body string
		want       error
	}{
		{"empty sites written", strings.TrimSuffix(sampleBody, "}") + `,"sites":[]}`, ErrMalformed},
		{"empty leases written", strings.TrimSuffix(sampleBody, "}") + `,"quota_leases":[]}`, ErrMalformed},
		{"null sites", strings.TrimSuffix(sampleBody, "}") + `,"sites":null}`, ErrMalformed},
		{"leases before sites", strings.TrimSuffix(sampleBody, "}") + `,"quota_leases":[{"policy":"p","region":"eu-west","per_second":1,"burst":1,"nodes":0,"expires_unix_nano":1796184010000000000}],"sites":[{"name":"a","region":"eu-west","announcing":[],"reported_at_unix_nano":1796183999000000000}]}`, ErrMalformed},
		{"null announcing", repl(`"announcing":[]`, `"announcing":null`), ErrMalformed},
		{"unknown site field", repl(`"region":"us-east","announcing"`, `"region":"us-east","zone":"a","announcing"`), ErrMalformed},
		{"float rate", repl(`"per_second":50,`, `"per_second":5.0,`), ErrMalformed},
		{"negative burst", repl(`"burst":10,`, `"burst":-10,`), ErrMalformed},
		{"unsorted sites", repl(`"name":"iad-1"`, `"name":"aaa-1"`), ErrInvalid},
		{"duplicate site", repl(`"name":"iad-1"`, `"name":"fra-1"`), ErrInvalid},
		{"bad site name", repl(`"name":"iad-1"`, `"name":"iad 1"`), ErrInvalid},
		{"empty site region", repl(`"region":"us-east","announcing"`, `"region":"","announcing"`), ErrInvalid},
		{"not a prefix", repl(`"192.0.2.0/24"`, `"192.0.2.0"`), ErrInvalid},
		{"unmasked prefix", repl(`"192.0.2.0/24"`, `"192.0.2.1/24"`), ErrInvalid},
		{"non-canonical prefix", repl(`"2001:db8::/48"`, `"2001:0db8::/48"`), ErrInvalid},
		{"unsorted prefixes", repl(`["192.0.2.0/24","2001:db8::/48"]`, `["2001:db8::/48","192.0.2.0/24"]`), ErrInvalid},
		{"duplicate prefix", repl(`["192.0.2.0/24","2001:db8::/48"]`, `["192.0.2.0/24","192.0.2.0/24"]`), ErrInvalid},
		{"reported zero", repl(`"reported_at_unix_nano":1796183998000000000`, `"reported_at_unix_nano":0`), ErrInvalid},
		{"reported after created", repl(`"reported_at_unix_nano":1796183998000000000`, `"reported_at_unix_nano":1796184001000000000`), ErrInvalid},
		{"unsorted leases", repl(`"policy":"login"`, `"policy":"aaa"`), ErrInvalid},
		{"duplicate lease", repl(`{"policy":"api-global","region":"us-east"`, `{"policy":"api-global","region":"eu-west"`), ErrInvalid},
		{"lease unlisted region", repl(`{"policy":"login","region":"eu-west"`, `{"policy":"login","region":"ap-south"`), ErrInvalid},
		{"lease empty policy", repl(`"policy":"login"`, `"policy":""`), ErrInvalid},
		{"lease expires zero", repl(`"burst":10,"nodes":0,"expires_unix_nano":1796184010000000000`, `"burst":10,"nodes":0,"expires_unix_nano":0`), ErrInvalid},
	}
	s := sampleII()
	for _, c := range cases {
		_, err := decodeBody([]byte(c.body), s.Version, s.Created)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: decodeBody = %v, want %v", c.name, err, c.want)
		}
	}
	// Bounds, through Validate.
	big := sampleII()
	big.Sites[0].Announcing = make([]string, MaxAnnounced+1)
	if err := big.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "4097 announced prefixes") {
		t.Fatalf("too many prefixes: %.300v", err)
	}
	big = sampleII()
	big.Sites = make([]Site, MaxSites+1)
	if err := big.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "16385 sites") {
		t.Fatalf("too many sites: %.300v", err)
	}
}

func TestParseYAMLSitesLeases(t *testing.T) {
	src := sampleYAML + `
sites:
  - {name: iad-1, region: us-east, reported_ago: 2s}
  - {name: fra-1, region: eu-west, announcing: [2001:db8::/48, 192.0.2.0/24], reported_ago: 1s}
quota_leases:
  - {policy: login, region: eu-west, per_second: 50, burst: 10, expires_in: 10s}
  - {policy: api-global, region: us-east, per_second: 200000, burst: 20000, expires_in: 10s}
  - {policy: api-global, region: eu-west, per_second: 300000, burst: 30000, expires_in: 10s}
`
	want := sampleII()
	got, err := ParseYAML([]byte(src), want.Version, testCreated)
	if err != nil {
		t.Fatalf("ParseYAML: %v", err)
	}
	if !equalState(got, want) {
		t.Fatalf("ParseYAML:\n got %+v\nwant %+v", got, want)
	}
	for _, bad := range []struct{ src, want string }{
		{"regions: [{name: a}]\nsites: [{name: s, region: a, reported_ago: -1s}]", "reported_ago"},
		{"regions: [{name: a}]\nsites: [{name: s, region: a, announcing: [nope]}]", "announcing[0]"},
		{"regions: [{name: a}]\nquota_leases: [{policy: p, region: a, expires_in: soon}]", "expires_in"},
		{"regions: [{name: a}]\nquota_leases: [{policy: p, region: b}]", "not a listed region"},
	} {
		if _, err := ParseYAML([]byte(bad.src), want.Version, testCreated); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseYAML(%q) = %v, want an error saying %q", bad.src, err, bad.want)
		}
	}
}
