package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
)

func TestExample(t *testing.T) {
	c, err := Load("testdata/control.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy()
	if len(p.Stages) != 4 || p.Stages[1].Match.Zone != "eu-west-1a" || *p.Stages[1].Bake != 10*time.Minute ||
		p.Health.MaxLatencyIncreaseMs != 50 || c.Shadow().MaxUnexpected != 0 || c.Storage.Postgres.LeaseTTL.D() != 10*time.Second {
		t.Fatalf("%+v", p)
	}
	if got := c.Storage.Postgres.TxIdleTimeout.D(); got != 5*time.Second {
		t.Fatalf("tx_idle_timeout default %s, want lease_ttl/2", got)
	}
	pg := "signing_key: k\ntokens: [{name: a, role: admin, sha256: ab}]\nstorage: {type: postgres, postgres: {dsn: x, lease_ttl: 2s, tx_idle_timeout: %s}}\n"
	if _, err := Parse([]byte(fmt.Sprintf(pg, "2s"))); err == nil || !strings.Contains(err.Error(), "tx_idle_timeout") {
		t.Fatalf("tx_idle_timeout equal to lease_ttl: %v", err)
	}
	if c, err := Parse([]byte(fmt.Sprintf(pg, "1500ms"))); err != nil || c.Storage.Postgres.TxIdleTimeout.D() != 1500*time.Millisecond {
		t.Fatalf("tx_idle_timeout 1500ms: %v", err)
	}
	t.Setenv("RAMPART_CONTROL_DSN", "postgres://x@y/z")
	if dsn, err := c.PostgresDSN(); err != nil || dsn != "postgres://x@y/z" {
		t.Fatalf("dsn %q %v", dsn, err)
	}
}

func TestDefaultsAndTokens(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "node.token")
	if err := os.WriteFile(tokFile, []byte("node-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := "signing_key: k\nstorage: {dir: " + dir + "}\ntokens: [{name: n, role: node, token_file: " + tokFile + "}]\n"
	if _, err := Parse([]byte(shared)); err == nil || !strings.Contains(err.Error(), "allow_shared_node_tokens") {
		t.Fatalf("a shared node token without the opt-in: %v", err)
	}
	c, err := Parse([]byte(shared + "allow_shared_node_tokens: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9080" || c.Storage.Type != "embedded" || len(c.Policy().Stages) != 4 || c.Shadow().MaxUnexpected != 0 ||
		c.Policy().Health.MinRequests != 100 || c.WatchTimeout.D() != 30*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	toks, err := c.APITokens()
	if err != nil || len(toks) != 1 || toks[0].Role != api.RoleNode || toks[0].SHA256 != mustHash(t, api.HashToken("node-secret-0123456789")) {
		t.Fatalf("tokens %+v %v", toks, err)
	}
}

// bake: 0s is no bake, for the policy and for a stage; unset is the
// default (5m for the policy, the policy's for a stage).
func TestBakeZeroIsZero(t *testing.T) {
	base := "signing_key: k\nstorage: {dir: /x}\ntokens: [{name: a, role: admin, sha256: ab}]\n"
	c, err := Parse([]byte(base + "rollout: {bake: 0s, stages: [{name: a, bake: 0s}, {name: b}, {name: c, bake: 2s}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy()
	if p.Bake != 0 || p.Stages[0].Bake == nil || *p.Stages[0].Bake != 0 || p.Stages[1].Bake != nil || *p.Stages[2].Bake != 2*time.Second {
		t.Fatalf("policy bake %s, stages %+v", p.Bake, p.Stages)
	}
	c, err = Parse([]byte(base + "rollout: {stages: [{name: a}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Policy(); p.Bake != 5*time.Minute || p.Stages[0].Bake != nil {
		t.Fatalf("unset bake: policy %s, stage %v", p.Bake, p.Stages[0].Bake)
	}
	if _, err := Parse([]byte(base + "rollout: {stages: [{name: a, bake: -1s}]}\n")); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("a negative stage bake: %v", err)
	}
}

func mustHash(t *testing.T, h string) [32]byte {
	s, err := api.ParseTokenHash(h)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"storage: {dir: /x}\nsigning_key: k\n", "at least one token"},
		{"tokens: [{name: a, role: admin, sha256: ab}]\nstorage: {dir: /x}\n", "signing_key"},
		{"signing_key: k\nstorage: {dir: /x}\ntokens: [{name: a, role: root, sha256: ab}]\n", "role"},
		{"signing_key: k\nstorage: {dir: /x}\ntokens: [{name: a, role: admin}]\n", "exactly one of sha256"},
		{"signing_key: k\nstorage: {type: postgres}\ntokens: [{name: a, role: admin, sha256: ab}]\n", "dsn"},
		{"signing_key: k\nstorage: {dir: /x}\ntokens: [{name: a, role: admin, sha256: ab}]\nrollout: {stages: [{name: a}, {name: a}]}\n", "twice"},
		{"signing_key: k\nstorage: {dir: /x}\ntokens: [{name: a, role: admin, sha256: ab}]\nwatch_timeout: soon\n", "duration"},
		{"bogus: 1\n", "bogus"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", c.yaml, err, c.want)
		}
	}
	c, err := Parse([]byte("signing_key: k\nstorage: {dir: /x}\ntokens: [{name: a, role: admin, sha256: abc}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.APITokens(); err == nil {
		t.Fatal("a short sha256 was accepted")
	}
}
