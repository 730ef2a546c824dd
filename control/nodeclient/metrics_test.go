package nodeclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

const exposition = `# HELP rampart_requests_total Requests served.
# TYPE rampart_requests_total counter
rampart_requests_total{code="200",revision="users",route="get-user"} 90
rampart_requests_total{code="502",revision="users",route="get-user"} 7
rampart_requests_total{code="404",revision="",route="x"} 3
rampart_request_errors_total{fault="upstream",route="get-user"} 7
rampart_request_errors_total{fault="client",route="x"} 3
rampart_request_errors_total{fault="gateway",route="odd \"}\" name"} 1
rampart_request_duration_seconds_bucket{route="get-user",le="+Inf"} 100
rampart_request_duration_seconds_sum{route="get-user"} 0.5
rampart_request_duration_seconds_count{route="get-user"} 100
rampart_endpoint_healthy{cluster="db",endpoint="198.51.100.1:5432"} 1
rampart_endpoint_healthy{cluster="db",endpoint="198.51.100.2:5432"} 0
rampart_endpoint_healthy{cluster="api",endpoint="198.51.100.3:80"} 0
rampart_quota_decisions_total{outcome="allowed",policy="api"} 40
rampart_quota_decisions_total{outcome="limited",policy="api"} 2
rampart_quota_decisions_total{outcome="store_error",policy="api"} 9
rampart_quota_decisions_total{outcome="allowed",policy="login"} 5
go_goroutines 12
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if m.Requests != 100 || m.Errors != 8 || m.LatencySeconds != 0.5 || m.LatencyCount != 100 {
		t.Fatalf("%+v", m)
	}
	if ch := m.ClusterHealth(); len(ch) != 2 || ch[0] != (model.ClusterHealth{Name: "api", Healthy: 0, Total: 1}) || ch[1] != (model.ClusterHealth{Name: "db", Healthy: 1, Total: 2}) {
		t.Fatalf("ClusterHealth = %+v", ch)
	}
	if q := m.QuotaAttempts; len(q) != 2 || q["api"] != 42 || q["login"] != 5 {
		t.Fatalf("QuotaAttempts = %v, want api 42 (allowed and limited, not store_error), login 5", q)
	}
	for _, bad := range []string{"rampart_requests_total{code=\"200\" 5\n", "rampart_requests_total x\n", "lonely\n"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestAdminObserver(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			_, _ = w.Write([]byte(`{"desired_version":"3.9","active_version":"3.8","ready":true,"routes":4}`))
		case "/metrics":
			_, _ = w.Write([]byte(exposition))
		}
	}))
	defer srv.Close()
	o, err := AdminObserver(srv.URL, nil)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.Active.String() != "3.8" || !o.Ready || o.Requests != 100 || o.Errors != 8 || o.LatencyCount != 100 || len(o.Clusters) != 2 {
		t.Fatalf("%+v", o)
	}
}

// FuzzParseMetrics: any text parses or fails cleanly; errors never exceed
// what was summed as given.
func FuzzParseMetrics(f *testing.F) {
	f.Add(exposition)
	f.Add("rampart_requests_total NaN\nrampart_requests_total +Inf 123\n")
	f.Add(`rampart_request_errors_total{fault="gate\"way"} 1e30`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseMetrics(strings.NewReader(s))
	})
}

// The demand meter reports attempts per second between two reports,
// nothing on the first, and counts a counter that went down from 0.
func TestDemandMeter(t *testing.T) {
	var m demandMeter
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	if r := m.rates(map[string]uint64{"api": 100}, t0); r != nil {
		t.Fatalf("first call: %v, want nothing", r)
	}
	r := m.rates(map[string]uint64{"api": 1100, "login": 20}, t0.Add(2*time.Second))
	if len(r) != 2 || r[0] != (model.QuotaDemand{Policy: "api", PerSecond: 500}) || r[1] != (model.QuotaDemand{Policy: "login", PerSecond: 10}) {
		t.Fatalf("rates = %+v, want api 500/s, login 10/s", r)
	}
	r = m.rates(map[string]uint64{"api": 30}, t0.Add(3*time.Second))
	if len(r) != 1 || r[0].PerSecond != 30 {
		t.Fatalf("after a restart: %+v, want api 30/s", r)
	}
}
