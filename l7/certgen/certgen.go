// Package certgen makes self-signed certificates for the quickstart, tests
// and the perf lab.
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Ensure makes a self-signed certificate for localhost, *.localhost,
// 127.0.0.1 and ::1 on first start and reuses it afterwards. It is its own
// CA, so `curl --cacert cert.pem` trusts it.
func Ensure(dir string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, "localhost.crt"), filepath.Join(dir, "localhost.key")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("stat %s: %w", certFile, err)
	}
	certPEM, keyPEM, err := SelfSigned([]string{"localhost", "*.localhost"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, 365*24*time.Hour)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", keyFile, err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("write %s: %w", certFile, err)
	}
	return certFile, keyFile, nil
}

// SelfSigned returns a PEM certificate and PKCS#8 key (ECDSA P-256) for the
// given names, valid for d.
func SelfSigned(names []string, ips []net.IP, d time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, fmt.Errorf("certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: names[0], Organization: []string{"rampart quickstart"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(d),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              names,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode certificate key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), nil
}
