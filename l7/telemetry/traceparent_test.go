package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// otelParse is the reference: what propagation.TraceContext extracts.
func otelParse(v string) (trace.SpanContext, bool) {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": v})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

func checkSameAsOTel(t *testing.T, v string) {
	t.Helper()
	tid, sid, flags, ok := parseTraceparent(v)
	want, wantOK := otelParse(v)
	if ok != wantOK {
		t.Fatalf("parseTraceparent(%q) ok = %v, propagation.TraceContext says %v", v, ok, wantOK)
	}
	if ok && (tid != want.TraceID() || sid != want.SpanID() || flags != want.TraceFlags()) {
		t.Fatalf("parseTraceparent(%q) = %s %s %s, propagation.TraceContext: %s %s %s",
			v, tid, sid, flags, want.TraceID(), want.SpanID(), want.TraceFlags())
	}
}

var traceparentCases = []struct {
	v  string
	ok bool
}{
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", true},        // sampled + random
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04", false},       // reserved bit in v00
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false}, // v00 has no extra fields
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra", true},  // later versions may
	{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09extra", false},  // but after a dash
	{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},       // version ff
	{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},       // zero trace id
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},       // zero span id
	{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", false},       // upper case
	{"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", false},       // misplaced dash
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", false},        // short
	{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false},       // not hex
	{" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},      // leading space
	{"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false},       // wrong separator
	{"", false},
}

func TestParseTraceparentMatchesPropagator(t *testing.T) {
	for _, c := range traceparentCases {
		_, _, _, ok := parseTraceparent(c.v)
		if ok != c.ok {
			t.Errorf("parseTraceparent(%q) ok = %v, want %v", c.v, ok, c.ok)
		}
		checkSameAsOTel(t, c.v)
	}
}

func TestFormatTraceparentRoundTrips(t *testing.T) {
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled, trace.FlagsSampled | trace.FlagsRandom} {
		tid, sid := newTraceID(), newSpanID()
		v := formatTraceparent(tid, sid, flags)
		sc, ok := otelParse(v)
		if !ok || sc.TraceID() != tid || sc.SpanID() != sid || sc.TraceFlags() != flags {
			t.Fatalf("formatTraceparent = %q, propagation.TraceContext reads %v %s %s %s", v, ok, sc.TraceID(), sc.SpanID(), sc.TraceFlags())
		}
		var w propagation.MapCarrier = map[string]string{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(),
			trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags})), w)
		if w["traceparent"] != v {
			t.Fatalf("formatTraceparent = %q, propagation.TraceContext writes %q", v, w["traceparent"])
		}
	}
}

// FuzzTraceparent holds the parser to propagation.TraceContext's answers on
// arbitrary input.
func FuzzTraceparent(f *testing.F) {
	for _, c := range traceparentCases {
		f.Add(c.v)
	}
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-")
	f.Add(strings.Repeat("a", 55))
	f.Fuzz(func(t *testing.T, v string) {
		checkSameAsOTel(t, v)
	})
}
