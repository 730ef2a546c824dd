package server_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
)

// nodeCA issues client certificates; a leaf for node id carries the URI
// SAN spiffe://rampart/node/<id> ("" : no URI SAN).
type nodeCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newNodeCA(t *testing.T, dir string) (*nodeCA, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodes CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	f := filepath.Join(dir, "ca.crt")
	_ = os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	return &nodeCA{cert: c, key: key, dir: dir}, f
}

func (ca *nodeCA) leaf(t *testing.T, name, node string) (certFile, keyFile string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if node != "" {
		u, _ := url.Parse(api.NodeURIPrefix + node)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), 0o600)
	return certFile, keyFile
}

// With mTLS, a client certificate that names a node (URI SAN
// spiffe://rampart/node/<id>) speaks only for that node, whatever token
// comes with it; a certificate naming no node leaves the binding to the
// token.
func TestNodeCertificateBindsTheNode(t *testing.T) {
	var ca *nodeCA
	s, base, srvCrt := serveMutualTLS(t, func(dir string) string {
		var caFile string
		ca, caFile = newNodeCA(t, dir)
		return caFile
	})
	client := func(name, node string) *http.Client {
		c, k := ca.leaf(t, name, node)
		hc, err := nodeclient.TLSClient(srvCrt, c, k)
		if err != nil {
			t.Fatal(err)
		}
		return hc
	}
	n1Cert, plainCert := client("n1", "n1"), client("ops", "")
	call := func(hc *http.Client, token, method, path string, body []byte) (int, string) {
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	enrol := func(id string) string {
		code, body := call(plainCert, adminToken, "POST", "/v1/nodes/"+id+"/enroll", nil)
		var e struct{ Token string }
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &e) != nil {
			t.Fatalf("enrol %s: %d %s", id, code, body)
		}
		return e.Token
	}
	eventually(t, 30*time.Second, "leader", func() bool { return s.Store.Leader().Leader })
	t1, t2 := enrol("n1"), enrol("n2")
	report := func(hc *http.Client, token, id string) (int, string) {
		body, _ := json.Marshal(model.Status{Identity: model.Identity{NodeID: id}, Ready: true})
		return call(hc, token, "POST", "/v1/node/status", body)
	}
	if code, body := report(n1Cert, t1, "n1"); code != http.StatusNoContent {
		t.Fatalf("n1's certificate and token as n1: %d %s", code, body)
	}
	if code, body := report(n1Cert, t2, "n2"); code != http.StatusForbidden {
		t.Fatalf("n1's certificate with n2's token as n2: %d %s, want 403", code, body)
	}
	if code, body := report(plainCert, t2, "n2"); code != http.StatusNoContent {
		t.Fatalf("a certificate naming no node, n2's token as n2: %d %s", code, body)
	}
	if code, body := report(plainCert, t1, "n2"); code != http.StatusForbidden {
		t.Fatalf("n1's token as n2: %d %s, want 403", code, body)
	}
}
