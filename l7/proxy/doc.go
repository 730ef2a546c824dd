// Package proxy is rampart's L7 proxy process: it builds one immutable
// runtime per verified snapshot (route table, clusters, compiled stage
// chains, listener certificates) and swaps it in atomically; requests in
// flight finish on the runtime they started with.
//
// The request path (handler.go) is: the runtime's screen chain (package
// stage), the request checks every protocol shares (check.go), route match
// and the traffic split's roll of a revision, then the route's chain — its
// policy stages and, last, the forward stage (forward.go: admission, the
// request body, an endpoint pick per attempt from package cluster, retries,
// the response; h2c.go for gRPC upstreams, upgrade.go for WebSocket
// tunnels). Listeners (package listener) hand it requests; the access log
// (package accesslog) gets one line per request. admin.go serves /healthz,
// /readyz, /metrics and /status.
package proxy
