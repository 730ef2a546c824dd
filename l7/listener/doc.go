// Package listener is the proxy's client side below the request path: one
// Listener per configured listener, owning its socket and accept loop and
// handing each request to Env.Handler.
//
//   - TLS with certificates picked by SNI (Certs: exact name, then the
//     wildcard of the first label, then the first configured), TLS 1.2 or
//     1.3 minimum, ALPN h2 and http/1.1 as the listener's protocols say.
//   - HTTP/1.1 on rampart's own server (package h1); HTTP/2 on rampart's
//     (package h2, h2_server: rampart, the default), whose abuse bounds
//     are built in, or with h2_server: std on x/net's, behind a frame
//     guard that closes connections over h2_max_resets_per_second (rapid
//     reset) or with a CONTINUATION flood, and a write-side watch that
//     counts x/net's own 431/400 refusals;
//     HTTP/3 (quic-go) on a UDP socket of the same port when protocols
//     include h3, announced with Alt-Svc on the TCP side.
//   - max_connections (a semaphore at accept, and for QUIC before the
//     handshake), request_body_timeout_ms for every protocol, read header
//     and idle timeouts.
//   - Generations: a snapshot that changes a listener's settings starts a
//     new generation of servers on the same socket (no connection attempt
//     is refused); the old one drains within DrainTimeout.
//   - Sockets duplicates the listening sockets for the node agent's
//     hand-off.
//
// Metrics: rampart_connections_accepted_total, rampart_connections_rejected_total,
// rampart_h2_connections_closed_total, rampart_request_body_timeouts_total,
// rampart_h3_udp_receive_buffer_bytes; refusals before any handler go to
// Env.Refused (the proxy counts them in rampart_bad_requests_total).
package listener
