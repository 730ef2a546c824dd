// Package otlptest is a fake OTLP/HTTP trace collector for tests: it
// decodes what exporters post to /v1/traces and keeps the spans.
package otlptest

import (
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is what a test checks of an exported span.
type Span struct {
	Name         string
	TraceID      string // hex
	SpanID       string // hex
	ParentSpanID string // hex, "" for a root
	Kind         tracepb.Span_SpanKind
	Service      string
	Attrs        map[string]string // string values; ints as decimal
}

// Collector is a running fake collector.
type Collector struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []Span
	requests int
	bad      []string // problems with requests (wrong method, type, body)
}

// Start starts a collector closed at the end of the test.
func Start(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/traces":
		c.bad = append(c.bad, r.Method+" "+r.URL.Path)
		http.NotFound(w, r)
		return
	case r.Header.Get("Content-Type") != "application/x-protobuf":
		c.bad = append(c.bad, "content-type "+r.Header.Get("Content-Type"))
		http.Error(w, "unsupported content type", http.StatusUnsupportedMediaType)
		return
	case err != nil:
		c.bad = append(c.bad, "read body: "+err.Error())
		return
	}
	var req collpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		c.bad = append(c.bad, "decode: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentSpanID: hex.EncodeToString(s.ParentSpanId), Kind: s.Kind, Service: service, Attrs: map[string]string{}}
				for _, kv := range s.Attributes {
					switch v := kv.GetValue().GetValue().(type) {
					case *commonpb.AnyValue_IntValue:
						sp.Attrs[kv.Key] = strconv.FormatInt(v.IntValue, 10)
					case *commonpb.AnyValue_StringValue:
						sp.Attrs[kv.Key] = v.StringValue
					}
				}
				c.spans = append(c.spans, sp)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Requests is the number of requests received, and Problems what was wrong
// with any of them.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

func (c *Collector) Problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// Blackhole returns the URL of a server that accepts connections and
// never reads or answers; its connections are closed at the end of the
// test.
func Blackhole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}
