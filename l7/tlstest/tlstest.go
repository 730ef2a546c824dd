// Package tlstest serves test connections over TLS on loopback: a fresh
// self-signed certificate (l7/certgen) in memory, a listener that
// completes each handshake and hands the connection on, and a client
// config that trusts that certificate only. For the tests of l7/h1 and
// l7/h2.
package tlstest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/certgen"
)

// handshakeTimeout bounds one server-side handshake (a liveness bound, not
// a figure: a stuck client must not keep a goroutine).
const handshakeTimeout = 30 * time.Second

// Server is a loopback TLS listener.
type Server struct {
	Addr  string         // host:port on 127.0.0.1
	Roots *x509.CertPool // holds the server's certificate only
}

// Serve listens on 127.0.0.1:0 with a certificate for 127.0.0.1, ::1 and
// localhost, and hands each connection whose handshake completed (offering
// nextProtos in ALPN, if any) to serve in a goroutine of its own; a failed
// handshake closes the connection. The listener closes when the test ends.
func Serve(t testing.TB, serve func(*tls.Conn), nextProtos ...string) *Server {
	t.Helper()
	certPEM, keyPEM, err := certgen.SelfSigned([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, time.Hour)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("tlstest: load the certificate: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("tlstest: the certificate does not parse")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tlstest: listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: nextProtos}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
				if err := tc.Handshake(); err != nil {
					_ = tc.Close()
					return
				}
				_ = tc.SetDeadline(time.Time{})
				serve(tc)
			}()
		}
	}()
	return &Server{Addr: ln.Addr().String(), Roots: roots}
}

// ClientConfig is a client config that trusts the server's certificate
// (and nothing else) for 127.0.0.1.
func (s *Server) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: s.Roots, ServerName: "127.0.0.1"}
}
