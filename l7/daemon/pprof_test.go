package daemon

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/proxy"
)

// The admin listener serves /debug/pprof/ only with Config.Pprof (the
// -pprof flag of rampart proxy and rampart up); otherwise it is a 404.
func TestPprofOnTheAdminListenerOnlyWithTheFlag(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	for _, on := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan net.Addr, 1)
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Config{StateDir: t.TempDir(), PublicKey: pub, AdminAddr: "127.0.0.1:0", Pprof: on,
				Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
				Started: func(_ *proxy.Proxy, a net.Addr) { started <- a }})
		}()
		var admin string
		select {
		case a := <-started:
			admin = "http://" + a.String()
		case err := <-done:
			t.Fatalf("Run: %v", err)
		}
		want := 404
		if on {
			want = 200
		}
		if c := code(admin + "/debug/pprof/"); c != want {
			t.Errorf("Pprof %v: /debug/pprof/ answered %d, want %d", on, c, want)
		}
		if c := code(admin + "/healthz"); c != 200 {
			t.Errorf("Pprof %v: /healthz answered %d", on, c)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return")
		}
	}
}
