package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// bodyRouteLab routes POST /hooks by data.type to orders or users (no
// default) and POST /hooks2 the same way with users as the default. Both
// upstreams echo the body they received and the X-Added header the
// chosen route's header rules set; users allows one request at a time.
func bodyRouteLab(t *testing.T) *lab {
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Added", r.Header.Get("X-Added"))
		w.Header().Set("X-Got-Length", r.Header.Get("Content-Length"))
		_, _ = io.Copy(w, r.Body)
	}
	orders, users := startUpstream(t, "orders", echo), startUpstream(t, "users", echo)
	l := newLab(t)
	c := l.config()
	for i := range c.Listeners {
		c.Listeners[i].RequestBodyTimeoutMs = 500
	}
	c.Clusters = []snapshot.Cluster{clusterOf("orders", orders.Addr()), clusterOf("users", users.Addr())}
	post := func(id, path string) snapshot.Route {
		return snapshot.Route{ID: id, Host: "*", Methods: []string{"POST"}, PathTemplate: path, TimeoutMs: 10000, Idempotency: "none"}
	}
	hooks := post("hooks", "/hooks")
	hooks.BodyRoute = &snapshot.BodyRoute{Field: "data.type", MaxBodyBytes: 1024,
		Cases: map[string]string{"order.created": "orders-route", "user.deleted": "users-route"}}
	hooks2 := post("hooks2", "/hooks2")
	hooks2.BodyRoute = &snapshot.BodyRoute{Field: "data.type", Cases: map[string]string{"order.created": "orders-route"}, Default: "users-route"}
	ordersRoute := post("orders-route", "/internal/orders")
	ordersRoute.UpstreamCluster = "orders"
	ordersRoute.Headers = &snapshot.HeaderRules{Request: snapshot.HeaderOps{Set: map[string]string{"X-Added": "orders"}}}
	usersRoute := post("users-route", "/internal/users")
	usersRoute.UpstreamCluster = "users"
	usersRoute.MaxConcurrentRequests = 1
	usersRoute.Headers = &snapshot.HeaderRules{Request: snapshot.HeaderOps{Set: map[string]string{"X-Added": "users"}}}
	c.Routes = []snapshot.Route{hooks, hooks2, ordersRoute, usersRoute}
	l.apply(c)
	return l
}

func TestBodyRouting(t *testing.T) {
	l := bodyRouteLab(t)
	order := "{\"id\": 7, \"type\": \"decoy\", \"data\": {\"note\": [1, {\"type\": \"x\"}], \"type\": \"order.created\", \"more\": \"\\u00e9\"}}\n  "
	cases := []struct {
		name, path, ctype, body string
		status                  int
		upstream                string // "": answered by the proxy
	}{
		{"order", "/hooks", "application/json", order, 200, "orders"},
		{"user, +json with charset, chunked", "/hooks", "application/cloudevents+json; charset=utf-8", `{"data":{"type":"user.deleted"}}`, 200, "users"},
		{"no case, no default", "/hooks", "application/json", `{"data":{"type":"other"}}`, 400, ""},
		{"not JSON", "/hooks", "application/json", `order.created`, 400, ""},
		{"truncated", "/hooks", "application/json", `{"data":{"ty`, 400, ""},
		{"field missing", "/hooks", "application/json", `{"data":{"kind":"order.created"}}`, 400, ""},
		{"field not a string", "/hooks", "application/json", `{"data":{"type":{"a":1}}}`, 400, ""},
		{"empty body", "/hooks", "application/json", ``, 400, ""},
		{"huge", "/hooks", "application/json", `{"data":{"type":"order.created","pad":"` + strings.Repeat("x", 1024) + `"}}`, 413, ""},
		{"huge, chunked (odd index)", "/hooks", "application/json", `{"pad":"` + strings.Repeat("y", 2048) + `"}`, 413, ""},
		{"wrong content type", "/hooks", "text/plain", order, 415, ""},
		{"no content type", "/hooks", "", order, 415, ""},
		{"default: not JSON", "/hooks2", "application/json", `{"data":`, 200, "users"},
		{"default: no case", "/hooks2", "application/json", `{"data":{"type":"x"}}`, 200, "users"},
		{"case with a default", "/hooks2", "application/json", order, 200, "orders"},
	}
	for _, proto := range []string{"h1", "h2"} {
		client := l.h1()
		if proto == "h2" {
			client = l.h2()
		}
		for i, tc := range cases {
			var body io.Reader = strings.NewReader(tc.body)
			if i%2 == 1 {
				body = io.MultiReader(body) // length unknown: chunked on HTTP/1.1
			}
			req, _ := http.NewRequest("POST", l.url("https", tc.path), body)
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", proto, tc.name, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != map[string]int{"h1": 1, "h2": 2}[proto] {
				t.Fatalf("%s %s: answered over %s", proto, tc.name, resp.Proto)
			}
			if resp.StatusCode != tc.status || resp.Header.Get("X-Upstream") != tc.upstream {
				t.Errorf("%s %s: %d from %q (%s), want %d from %q", proto, tc.name, resp.StatusCode, resp.Header.Get("X-Upstream"), got, tc.status, tc.upstream)
				continue
			}
			if tc.upstream != "" {
				if !bytes.Equal(got, []byte(tc.body)) {
					t.Errorf("%s %s: upstream got body %q, want the bytes sent %q", proto, tc.name, got, tc.body)
				}
				if resp.Header.Get("X-Added") != tc.upstream {
					t.Errorf("%s %s: X-Added %q: the chosen route's header rules did not apply", proto, tc.name, resp.Header.Get("X-Added"))
				}
			}
		}
	}
	if n := testutil.ToFloat64(l.p.metrics.requests.WithLabelValues("orders-route", "orders", "200")); n != 4 {
		t.Errorf("rampart_requests_total{orders-route,orders,200} = %v, want 4 (counted under the chosen route)", n)
	}
}

// A body that stalls before the field is answered 408 (or, when the client
// is still writing it, ends the exchange) and holds no slot afterwards: the
// users route, which admits one request at a time, serves the next one.
func TestBodyRoutingStalledBody(t *testing.T) {
	l := bodyRouteLab(t)
	for _, proto := range []string{"h1", "h2"} {
		client := l.h1()
		if proto == "h2" {
			client = l.h2()
		}
		before := stalls(t, l)
		stop := make(chan struct{})
		req, _ := http.NewRequest("POST", l.url("https", "/hooks2"), &stalledBody{stop: stop, closed: make(chan struct{})})
		req.ContentLength = 10
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		close(stop)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("%s: stalled body answered %d, want 408", proto, resp.StatusCode)
			}
		}
		eventually(t, 30*time.Second, proto+": the stall counted as 408", func() bool {
			return stalls(t, l) == before+1
		})
		waitFree(t, l)
		for i := 0; i < 3; i++ {
			req, _ := http.NewRequest("POST", l.url("https", "/hooks2"), strings.NewReader(`{"data":{"type":"user.deleted"}}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: request after the stall: %v", proto, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "users" {
				t.Fatalf("%s: request %d after the stall: %d from %q, want 200 from users", proto, i, resp.StatusCode, resp.Header.Get("X-Upstream"))
			}
		}
	}
}

func stalls(t *testing.T, l *lab) float64 {
	return metricValue(t, l.p.metrics.Registry, "rampart_body_route_total", "route", "hooks2", "outcome", "408")
}
