package proxy

import (
	"os"
	"testing"

	"github.com/rampart-edge/rampart/l7/listener"
)

// TestMain lets the suite run its HTTP/2 cases on either server:
// H2_SERVER=std go test ./l7/proxy (default: the listener's, rampart).
func TestMain(m *testing.M) {
	if v := os.Getenv("H2_SERVER"); v != "" {
		listener.DefaultH2Server = v
	}
	os.Exit(m.Run())
}
