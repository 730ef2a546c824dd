package regionstate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

var testCreated = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

// sample is a valid state with two regions and two platforms.
func sample() *State {
	obs := testCreated.Add(-2 * time.Second)
	return &State{
		Version: envelope.Version{Epoch: 3, Sequence: 17},
		Created: testCreated,
		Regions: []Region{
			{Name: "eu-west", Healthy: true, ConfigVersion: envelope.Version{Epoch: 1, Sequence: 40}},
			{Name: "us-east", Healthy: false, ConfigVersion: envelope.Version{Epoch: 1, Sequence: 39}, Draining: true},
		},
		Platforms: []Platform{
			{Name: "billing", Writer: "eu-west", WriterEpoch: 7, Replicas: []Replica{
				{Region: "eu-west", LagMs: 0, ObservedAt: obs},
				{Region: "us-east", LagMs: 250, ObservedAt: obs.Add(-time.Second)},
			}},
			{Name: "users", Replicas: []Replica{{Region: "us-east", LagMs: 12, ObservedAt: obs}}},
		},
	}
}

const sampleBody = `{"regions":[` +
	`{"name":"eu-west","healthy":true,"config_version":{"epoch":1,"sequence":40},"draining":false},` +
	`{"name":"us-east","healthy":false,"config_version":{"epoch":1,"sequence":39},"draining":true}],` +
	`"platforms":[` +
	`{"name":"billing","writer":"eu-west","writer_epoch":7,"replicas":[` +
	`{"region":"eu-west","lag_ms":0,"observed_at_unix_nano":1796183998000000000},` +
	`{"region":"us-east","lag_ms":250,"observed_at_unix_nano":1796183997000000000}]},` +
	`{"name":"users","writer":"","writer_epoch":0,"replicas":[` +
	`{"region":"us-east","lag_ms":12,"observed_at_unix_nano":1796183998000000000}]}]}`

func TestBodyCanonicalRoundTrip(t *testing.T) {
	s := sample()
	body := encodeBody(nil, s)
	if string(body) != sampleBody {
		t.Fatalf("encodeBody:\n got %s\nwant %s", body, sampleBody)
	}
	back, err := decodeBody(body, s.Version, s.Created)
	if err != nil {
		t.Fatalf("decodeBody(canonical): %v", err)
	}
	if !equalState(back, s) {
		t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", back, s)
	}
	empty := &State{Version: s.Version, Created: s.Created}
	eb := encodeBody(nil, empty)
	if string(eb) != `{"regions":[],"platforms":[]}` {
		t.Fatalf("empty body = %s", eb)
	}
	if _, err := decodeBody(eb, s.Version, s.Created); err != nil {
		t.Fatalf("decodeBody(empty): %v", err)
	}
}

// TestBodyRefused changes the canonical body one way at a time; each must
// be refused with the named sentinel.
func TestBodyRefused(t *testing.T) {
	repl := func(old, new string) string {
		if !strings.Contains(sampleBody, old) {
			t.Fatalf("test bug: %q not in the sample body", old)
		}
		return strings.Replace(sampleBody, old, new, 1)
	}
	cases := []struct {
		name, body string
		want       error
	}{
		{"empty", "", ErrMalformed},
		{"not JSON", "nope", ErrMalformed},
		{"truncated", sampleBody[:len(sampleBody)-1], ErrMalformed},
		{"trailing bytes", sampleBody + "{}", ErrMalformed},
		{"trailing newline", sampleBody + "\n", ErrMalformed},
		{"leading space", " " + sampleBody, ErrMalformed},
		{"space inside", repl(`"healthy":true`, `"healthy": true`), ErrMalformed},
		{"unknown top field", repl(`{"regions":`, `{"extra":1,"regions":`), ErrMalformed},
		{"unknown region field", repl(`"draining":false}`, `"draining":false,"zone":"a"}`), ErrMalformed},
		{"unknown replica field", repl(`"lag_ms":0,`, `"lag_ms":0,"lag":1,`), ErrMalformed},
		{"duplicate key", repl(`"healthy":true,`, `"healthy":false,"healthy":true,`), ErrMalformed},
		{"duplicate nested key", repl(`{"epoch":1,"sequence":40}`, `{"epoch":1,"epoch":1,"sequence":40}`), ErrMalformed},
		{"bool as string", repl(`"healthy":true`, `"healthy":"true"`), ErrMalformed},
		{"negative lag", repl(`"lag_ms":250`, `"lag_ms":-250`), ErrMalformed},
		{"float lag", repl(`"lag_ms":250`, `"lag_ms":2.5`), ErrMalformed},
		{"lag over uint64", repl(`"lag_ms":250`, `"lag_ms":18446744073709551616`), ErrMalformed},
		{"name as number", repl(`"name":"users"`, `"name":7`), ErrMalformed},
		{"regions null", repl(`"platforms":[`, `"platforms":null,"x":[`), ErrMalformed},
		{"field order", repl(`"healthy":true,"config_version":{"epoch":1,"sequence":40}`, `"config_version":{"epoch":1,"sequence":40},"healthy":true`), ErrMalformed},
		{"missing field", repl(`,"draining":false}`, `}`), ErrMalformed},
		{"escaped name", repl(`"name":"users"`, `"name":"\u0075sers"`), ErrMalformed},
		{"leading zero", repl(`"writer_epoch":7`, `"writer_epoch":07`), ErrMalformed},
		{"unsorted regions", repl(`"name":"eu-west","healthy":true`, `"name":"zz-west","healthy":true`), ErrInvalid},
		{"duplicate region", repl(`"name":"us-east","healthy":false`, `"name":"eu-west","healthy":false`), ErrInvalid},
		{"empty region name", repl(`"name":"eu-west","healthy":true`, `"name":"","healthy":true`), ErrInvalid},
		{"bad name byte", repl(`"name":"users"`, `"name":"us ers"`), ErrInvalid},
		{"unlisted writer", repl(`"writer":"eu-west"`, `"writer":"ap-south"`), ErrInvalid},
		{"epoch without writer", repl(`"writer":"","writer_epoch":0`, `"writer":"","writer_epoch":2`), ErrInvalid},
		{"unlisted replica", repl(`{"region":"us-east","lag_ms":12`, `{"region":"ap-south","lag_ms":12`), ErrInvalid},
		{"unsorted replicas", repl(`{"region":"eu-west","lag_ms":0`, `{"region":"zz","lag_ms":0`), ErrInvalid},
		{"observed zero", repl(`"lag_ms":12,"observed_at_unix_nano":1796183998000000000`, `"lag_ms":12,"observed_at_unix_nano":0`), ErrInvalid},
		{"observed after created", repl(`"lag_ms":12,"observed_at_unix_nano":1796183998000000000`, `"lag_ms":12,"observed_at_unix_nano":1796184001000000000`), ErrInvalid},
	}
	s := sample()
	for _, c := range cases {
		_, err := decodeBody([]byte(c.body), s.Version, s.Created)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: decodeBody = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := sample().Validate(); err != nil {
		t.Fatalf("sample: %v", err)
	}
	cases := []struct {
		name   string
		change func(*State)
		want   string
	}{
		{"zero version", func(s *State) { s.Version = envelope.Version{} }, "version 0.0"},
		{"zero created", func(s *State) { s.Created = time.Time{} }, "created (zero)"},
		{"created far future", func(s *State) { s.Created = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }, "created 2300"},
		{"long name", func(s *State) { s.Platforms[1].Name = "u" + strings.Repeat("x", MaxNameBytes) }, "over the 64 limit"},
		{"unsorted platforms", func(s *State) { s.Platforms[0].Name = "zeta" }, "platforms must be sorted"},
		{"duplicate replica", func(s *State) { s.Platforms[0].Replicas[1].Region = "eu-west" }, "replicas must be sorted"},
		{"too many regions", func(s *State) { s.Regions = make([]Region, MaxRegions+1) }, "1025 regions is over"},
	}
	for _, c := range cases {
		s := sample()
		c.change(s)
		err := s.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
	// Every problem is listed, up to the bound.
	s := sample()
	s.Version = envelope.Version{}
	s.Platforms[0].Writer = "nowhere"
	s.Platforms[1].Replicas[0].ObservedAt = time.Time{}
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "3 problem(s)") {
		t.Fatalf("three problems: Validate = %v", err)
	}
	s = sample()
	s.Regions = make([]Region, MaxRegions+1)
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "more") {
		t.Fatalf("many problems are bounded: Validate = %.300v", err)
	}
}

func TestLookup(t *testing.T) {
	s := sample()
	r, ok := s.Region("us-east")
	if !ok || !r.Draining || r.ConfigVersion.Sequence != 39 {
		t.Fatalf(`Region("us-east") = %+v, %v`, r, ok)
	}
	if _, ok := s.Region("ap-south"); ok {
		t.Fatal(`Region("ap-south") found`)
	}
	p, ok := s.Platform("billing")
	if !ok || p.Writer != "eu-west" || p.WriterEpoch != 7 {
		t.Fatalf(`Platform("billing") = %+v, %v`, p, ok)
	}
	rep, ok := p.Replica("us-east")
	if !ok || rep.LagMs != 250 {
		t.Fatalf(`Replica("us-east") = %+v, %v`, rep, ok)
	}
	if _, ok := p.Replica("ap-south"); ok {
		t.Fatal(`Replica("ap-south") found`)
	}
	if _, ok := s.Platform("orders"); ok {
		t.Fatal(`Platform("orders") found`)
	}
	var none *State
	if _, ok := none.Region("eu-west"); ok {
		t.Fatal("nil state found a region")
	}
	if n := testing.AllocsPerRun(100, func() { s.Region("us-east"); s.Platform("users") }); n != 0 {
		t.Fatalf("lookups allocate %v times", n)
	}
}

func TestSortedCopies(t *testing.T) {
	s := sample()
	rev := &State{Version: s.Version, Created: s.Created}
	for i := len(s.Regions) - 1; i >= 0; i-- {
		rev.Regions = append(rev.Regions, s.Regions[i])
	}
	for i := len(s.Platforms) - 1; i >= 0; i-- {
		p := s.Platforms[i]
		var reps []Replica
		for j := len(p.Replicas) - 1; j >= 0; j-- {
			reps = append(reps, p.Replicas[j])
		}
		p.Replicas = reps
		rev.Platforms = append(rev.Platforms, p)
	}
	got := sorted(rev)
	if !equalState(got, s) {
		t.Fatalf("sorted(reversed) = %+v, want %+v", got, s)
	}
	if rev.Regions[0].Name != "us-east" || rev.Platforms[0].Replicas[0].Region != "us-east" {
		t.Fatal("sorted changed its input")
	}
}

func equalState(a, b *State) bool {
	if a.Version != b.Version || !a.Created.Equal(b.Created) || len(a.Regions) != len(b.Regions) || len(a.Platforms) != len(b.Platforms) {
		return false
	}
	for i := range a.Regions {
		if a.Regions[i] != b.Regions[i] {
			return false
		}
	}
	for i, p := range a.Platforms {
		q := b.Platforms[i]
		if p.Name != q.Name || p.Writer != q.Writer || p.WriterEpoch != q.WriterEpoch || len(p.Replicas) != len(q.Replicas) {
			return false
		}
		for j, r := range p.Replicas {
			s := q.Replicas[j]
			if r.Region != s.Region || r.LagMs != s.LagMs || !r.ObservedAt.Equal(s.ObservedAt) {
				return false
			}
		}
	}
	if len(a.Sites) != len(b.Sites) || len(a.QuotaLeases) != len(b.QuotaLeases) {
		return false
	}
	for i, st := range a.Sites {
		o := b.Sites[i]
		if st.Name != o.Name || st.Region != o.Region || !st.ReportedAt.Equal(o.ReportedAt) || strings.Join(st.Announcing, ",") != strings.Join(o.Announcing, ",") {
			return false
		}
	}
	for i, l := range a.QuotaLeases {
		o := b.QuotaLeases[i]
		if l.Policy != o.Policy || l.Region != o.Region || l.PerSecond != o.PerSecond || l.Burst != o.Burst || !l.Expires.Equal(o.Expires) {
			return false
		}
	}
	return true
}
