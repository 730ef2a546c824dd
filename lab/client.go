package lab

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HTTP is an HTTP client whose connections come from src (one of V4 or V6)
// in the client namespace; each request is a new connection, so ECMP at
// the router hashes each afresh. src "" lets the kernel choose.
func (c *Client) HTTP(src string) *http.Client { return HTTPClient(c.Netns, src, 5*time.Second) }

// Source returns the i-th source address of the client, cycling through
// the v4 sources, then the v6 ones.
func (c *Client) Source(i int) string {
	all := append(append([]string(nil), c.V4...), c.V6...)
	return all[i%len(all)]
}

// URL is http://VIP/path for a VIP address (IPv6 in brackets).
func URL(vip, path string) string {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if strings.Contains(vip, ":") {
		return fmt.Sprintf("http://[%s]%s", vip, path)
	}
	return "http://" + vip + path
}

// VIPFor returns the lab's VIP of src's family: the client reaches v4 VIPs
// from v4 sources and v6 VIPs from v6 sources.
func (l *Lab) VIPFor(src string) string {
	v6 := strings.Contains(src, ":")
	for _, v := range l.VIPs {
		if strings.Contains(v, ":") == v6 {
			return v
		}
	}
	return l.VIPs[0]
}
