package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseFlagsRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-rate", "0", "https://x/"},
		{"-rate", "2e6", "https://x/"},
		{"-d", "0s", "https://x/"},
		{"-proto", "h3", "https://x/"},
		{"-c", "0", "https://x/"},
		{"-proto", "h2", "-new", "https://x/"},
		{"-max-inflight", "0", "https://x/"},
		{"-H", "novalue", "https://x/"},
		{"https://x/", "https://y/"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	c, err := parseFlags([]string{"-rate", "500", "-H", "Authorization: Bearer t", "https://x/"})
	if err != nil || c.rate != 500 || c.header.Get("Authorization") != "Bearer t" || c.url != "https://x/" {
		t.Fatalf("got %+v, %v", c, err)
	}
}

func TestRunSendsTheScheduleAndCounts(t *testing.T) {
	var hits, withHeader atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Test") == "1" {
			withHeader.Add(1)
		}
		if r.URL.Path == "/bad" {
			w.WriteHeader(503)
			return
		}
		w.Write([]byte("ok"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	for _, tc := range []struct {
		proto string
		new   bool
	}{{"h1", false}, {"h1", true}, {"h2", false}} {
		hits.Store(0)
		withHeader.Store(0)
		c, err := parseFlags([]string{"-rate", "200", "-d", "500ms", "-c", "4", "-proto", tc.proto,
			"-new=" + map[bool]string{true: "true", false: "false"}[tc.new], "-H", "X-Test: 1", srv.URL + "/bench"})
		if err != nil {
			t.Fatal(err)
		}
		r := run(context.Background(), c)
		if r.Sent != 100 || r.OK != 100 || r.Errors != 0 || r.Non2xx != 0 || len(r.Latencies) != 100 {
			t.Fatalf("%s new=%v: %+v", tc.proto, tc.new, r)
		}
		if hits.Load() != 100 || withHeader.Load() != 100 {
			t.Fatalf("%s: server saw %d requests, %d with the header", tc.proto, hits.Load(), withHeader.Load())
		}
		for i := 1; i < len(r.Latencies); i++ {
			if r.Latencies[i] < r.Latencies[i-1] {
				t.Fatal("latencies not sorted")
			}
		}
		var out bytes.Buffer
		report(&out, c, r)
		if !strings.Contains(out.String(), "requests: 100\n") || !strings.Contains(out.String(), "latency_us: p50=") {
			t.Fatalf("report:\n%s", out.String())
		}
	}
	c, _ := parseFlags([]string{"-rate", "100", "-d", "200ms", srv.URL + "/bad"})
	if r := run(context.Background(), c); r.Non2xx != 20 || r.OK != 0 {
		t.Fatalf("503s: %+v", r)
	}
}

func TestQuantile(t *testing.T) {
	var l []time.Duration
	if quantile(l, .99) != 0 {
		t.Fatal("empty")
	}
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i))
	}
	if quantile(l, .5) != 50 || quantile(l, .99) != 99 || quantile(l, 1) != 100 {
		t.Fatalf("p50 %d p99 %d max %d", quantile(l, .5), quantile(l, .99), quantile(l, 1))
	}
}
