package anycast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// The agent's admin API for operator drains (POST, bearer token).
const (
	DrainPath   = "/anycast/drain"
	UndrainPath = "/anycast/undrain"
)

// DrainRequest is the body of a POST to DrainPath or UndrainPath. VIP ""
// is every VIP; an undrain lifts the operator drain given with the same
// VIP ("" included), so `undrain` after `drain -vip V` names V too.
type DrainRequest struct {
	VIP    string `json:"vip,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// DrainCommand is `rampart anycast drain -addr A -token-file F [-vip V]
// [-reason R]` and `rampart anycast undrain -addr A -token-file F [-vip V]`:
// it POSTs to the agent's admin API and prints the drains in force after.
func DrainCommand(args []string, stdout io.Writer) error {
	undrain := args[0] == "undrain"
	fs := flag.NewFlagSet("anycast "+args[0], flag.ContinueOnError)
	addr := fs.String("addr", "", "the agent's admin listener, host:port or http(s)://host:port (required)")
	tokenFile := fs.String("token-file", "", "file holding the agent's admin token (the agent's -admin-token-file) (required)")
	vip := fs.String("vip", "", "the VIP prefix (default: every VIP)")
	reason := new(string)
	if !undrain {
		reason = fs.String("reason", "", "why, shown in the status and logs")
	}
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *addr == "" || *tokenFile == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New(commandUsage)
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("anycast %s: admin token: %w", args[0], err)
	}
	path := DrainPath
	if undrain {
		path = UndrainPath
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	drains, err := PostDrain(ctx, *addr, path, strings.TrimSpace(string(tok)), DrainRequest{VIP: *vip, Reason: *reason})
	if err != nil {
		return err
	}
	if len(drains) == 0 {
		fmt.Fprintln(stdout, "no drains in force")
	}
	for _, d := range drains {
		v := d.VIP
		if v == "" {
			v = "every VIP"
		}
		fmt.Fprintf(stdout, "drained by %s: %s since %s", d.Source, v, d.Since.Format(time.RFC3339))
		if d.Reason != "" {
			fmt.Fprintf(stdout, " (%s)", d.Reason)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// PostDrain sends a drain or undrain to the agent at addr and returns the
// drains in force after it.
func PostDrain(ctx context.Context, addr, path, token string, r DrainRequest) ([]VIPDrain, error) {
	url := addr
	if !strings.Contains(addr, "://") {
		url = "http://" + addr
	}
	url = strings.TrimSuffix(url, "/") + path
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("anycast drain: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("post %s: %s: %s", url, resp.Status, strings.TrimSpace(string(out)))
	}
	var drains []VIPDrain
	if err := json.Unmarshal(out, &drains); err != nil {
		return nil, fmt.Errorf("decode the answer of %s: %w", url, err)
	}
	return drains, nil
}
