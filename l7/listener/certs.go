package listener

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Certs selects a certificate by SNI: exact name, then the wildcard
// covering the first label, then the first certificate configured.
type Certs struct {
	exact map[string]*tls.Certificate
	def   *tls.Certificate
}

// LoadCerts reads a listener's certificate files.
func LoadCerts(cs []snapshot.Certificate) (*Certs, error) {
	st := &Certs{exact: map[string]*tls.Certificate{}}
	for _, c := range cs {
		crt, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load certificate %s: %w", c.CertFile, err)
		}
		leaf, err := x509.ParseCertificate(crt.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("parse certificate %s: %w", c.CertFile, err)
		}
		crt.Leaf = leaf
		names := c.ServerNames
		if len(names) == 0 {
			names = leaf.DNSNames
		}
		for _, n := range names {
			n = strings.ToLower(n)
			if _, dup := st.exact[n]; !dup {
				st.exact[n] = &crt
			}
		}
		if st.def == nil {
			st.def = &crt
		}
	}
	return st, nil
}

// Get returns the certificate for a TLS server name.
func (s *Certs) Get(sni string) *tls.Certificate {
	sni = strings.ToLower(strings.TrimSuffix(sni, "."))
	if c := s.exact[sni]; c != nil {
		return c
	}
	if i := strings.IndexByte(sni, '.'); i > 0 {
		if c := s.exact["*"+sni[i:]]; c != nil {
			return c
		}
	}
	return s.def
}
