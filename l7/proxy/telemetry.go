package proxy

import (
	"context"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/telemetry"
)

// gatewayTracer makes each request's gateway span (W3C trace context in
// and out, OTLP export); see package telemetry.
type gatewayTracer = telemetry.Tracer

func newGatewayTracer(reg prometheus.Registerer, log *slog.Logger) *gatewayTracer {
	return telemetry.NewTracer(reg, log)
}

// configureTelemetry applies a snapshot's telemetry settings (access log
// policy and tracing); it runs in Apply once the snapshot is active.
func (p *Proxy) configureTelemetry(t snapshot.Telemetry) {
	p.accessLog.Configure(t.AccessLog)
	if err := p.tracer.Configure(t.Tracing); err != nil {
		p.errLog.Error("tracing settings not applied; the previous ones stay", "err", err)
	}
}

// shutdownTelemetry flushes spans within ctx (with a short grace if ctx
// has already ended).
func (p *Proxy) shutdownTelemetry(ctx context.Context) {
	if err := p.tracer.Shutdown(ctx); err != nil {
		p.errLog.Warn("tracing: spans not flushed", "err", err)
	}
}

// endSpan ends the request's gateway span with what its access log entry
// says; a span that is not recorded costs nothing here.
func (p *Proxy) endSpan(sp *telemetry.Span, e *accesslog.Entry) {
	if !sp.Recording() {
		return
	}
	host := e.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	sp.End(&telemetry.Attrs{Method: e.Method, Path: e.Path, Host: host, Route: e.Route, Revision: e.Revision,
		Upstream: e.Upstream, RequestID: e.ReqID, Status: e.Status})
}
