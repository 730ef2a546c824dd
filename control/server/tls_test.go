package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/nodeclient"
	"github.com/rampart-edge/rampart/control/server"
	"github.com/rampart-edge/rampart/l7/certgen"
)

// clientCert makes a self-signed client certificate (its own CA).
func clientCert(t *testing.T, dir string) (certFile, keyFile string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "node-1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), 0o600)
	return certFile, keyFile
}

// serveMutualTLS starts a control plane over TLS that asks for client
// certificates signed by the CA in clientCAFile (made by caFile(dir)); it
// returns the server, its base URL and its certificate file.
func serveMutualTLS(t *testing.T, caFile func(dir string) string) (s *server.Server, base, srvCrt string) {
	t.Helper()
	dir := t.TempDir()
	crt, key, err := certgen.SelfSigned([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvCrt, srvKey := filepath.Join(dir, "srv.crt"), filepath.Join(dir, "srv.key")
	_ = os.WriteFile(srvCrt, crt, 0o600)
	_ = os.WriteFile(srvKey, key, 0o600)
	cfg := backend{dir: t.TempDir()}.config(t, fast)
	cfg.TLS = &config.TLS{CertFile: srvCrt, KeyFile: srvKey, ClientCAFile: caFile(dir)}
	tc, err := server.TLSConfig(cfg.TLS)
	if err != nil {
		t.Fatal(err)
	}
	s, err = server.Open(cfg, server.Options{Key: testKey, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln, tc) }()
	return s, "https://" + ln.Addr().String(), srvCrt
}

// Over TLS with client_ca_file, a client needs a certificate and a token.
func TestMutualTLS(t *testing.T) {
	var cliCrt, cliKey string
	_, base, srvCrt := serveMutualTLS(t, func(dir string) string {
		cliCrt, cliKey = clientCert(t, dir)
		return cliCrt
	})
	url := base + "/v1/leader"

	get := func(c *http.Client, token string) (int, error) {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	noCert, err := nodeclient.TLSClient(srvCrt, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(noCert, readToken); err == nil {
		t.Fatalf("a client without a certificate got %d", code)
	}
	withCert, err := nodeclient.TLSClient(srvCrt, cliCrt, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(withCert, ""); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("certificate without a token: %d %v", code, err)
	}
	if code, err := get(withCert, readToken); err != nil || code != http.StatusOK {
		t.Fatalf("certificate and token: %d %v", code, err)
	}
}
