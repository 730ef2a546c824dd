package agent

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/format/envelope"
)

// drainsFile keeps the operator drains in the state dir across restarts.
const drainsFile = "anycast-drains.json"

// MaxAdminTokenBytes bounds -admin-token-file.
const MaxAdminTokenBytes = 4096

// ReadAdminToken reads an admin token file: one line, surrounding space
// trimmed, at least 16 bytes.
func ReadAdminToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	if len(data) > MaxAdminTokenBytes {
		return "", fmt.Errorf("admin token %s: over %d bytes", path, MaxAdminTokenBytes)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("admin token %s: want one word of at least 16 bytes", path)
	}
	return tok, nil
}

// operatorDrains are the drains `rampart anycast drain` asked for, kept
// in the state dir and given to the announcer whenever it (re)starts.
type operatorDrains struct {
	path string

	mu     sync.Mutex
	drains []anycast.VIPDrain
}

// load reads the persisted drains (none when the file is missing).
func (o *operatorDrains) load() error {
	data, err := os.ReadFile(o.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("operator drains: %w", err)
	}
	ds, err := parseOperatorDrains(data)
	if err != nil {
		return fmt.Errorf("operator drains %s: %w", o.path, err)
	}
	o.mu.Lock()
	o.drains = ds
	o.mu.Unlock()
	return nil
}

// MaxOperatorDrains bounds the drains file.
const MaxOperatorDrains = 4096

// parseOperatorDrains reads the drains file: a JSON list of drains
// (strict: unknown fields, trailing data, a bad VIP or reason, a VIP
// listed twice or more than MaxOperatorDrains are errors).
func parseOperatorDrains(data []byte) ([]anycast.VIPDrain, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ds []anycast.VIPDrain
	if err := dec.Decode(&ds); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the list")
	}
	if len(ds) > MaxOperatorDrains {
		return nil, fmt.Errorf("%d drains, over the %d limit", len(ds), MaxOperatorDrains)
	}
	seen := map[string]bool{}
	for i := range ds {
		ds[i].Source = anycast.DrainOperator
		if err := anycast.CheckDrain(&ds[i]); err != nil {
			return nil, fmt.Errorf("drain %d: %w", i, err)
		}
		if seen[ds[i].VIP] {
			return nil, fmt.Errorf("drain %d: vip %q listed twice", i, ds[i].VIP)
		}
		seen[ds[i].VIP] = true
	}
	return ds, nil
}

func (o *operatorDrains) list() []anycast.VIPDrain {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.drains)
}

// change applies f to a copy of the drains, persists the result, and only
// then makes it the drains in force.
func (o *operatorDrains) change(f func([]anycast.VIPDrain) ([]anycast.VIPDrain, error)) ([]anycast.VIPDrain, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	next, err := f(slices.Clone(o.drains))
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(o.path), 0o700); err != nil {
		return nil, fmt.Errorf("operator drains: %w", err)
	}
	if err := envelope.WriteFileAtomic(o.path, append(data, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("operator drains: persist %s: %w", o.path, err)
	}
	o.drains = next
	return slices.Clone(next), nil
}

// authorized checks the bearer token of an admin write in constant time:
// 401 without one, 403 with a wrong one or when the agent has no token.
func (a *Agent) authorized(w http.ResponseWriter, r *http.Request) bool {
	if a.adminToken == nil {
		http.Error(w, "admin writes are off: the agent runs without -admin-token-file", http.StatusForbidden)
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rampart agent"`)
		http.Error(w, "a bearer token is required (rampart anycast drain -token-file)", http.StatusUnauthorized)
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(sum[:], a.adminToken) != 1 {
		http.Error(w, "wrong admin token", http.StatusForbidden)
		return false
	}
	return true
}

// handleDrain serves POST DrainPath and UndrainPath.
func (a *Agent) handleDrain(undrain bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(w, r) {
			return
		}
		if a.ac == nil {
			http.Error(w, "anycast is off on this agent (no -anycast-config)", http.StatusNotFound)
			return
		}
		var req anycast.DrainRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "drain request: "+err.Error(), http.StatusBadRequest)
			return
		}
		d := anycast.VIPDrain{Source: anycast.DrainOperator, VIP: req.VIP, Reason: req.Reason, Since: time.Now().UTC()}
		if err := anycast.CheckDrain(&d); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, err := a.drains.change(func(ds []anycast.VIPDrain) ([]anycast.VIPDrain, error) {
			if undrain {
				return slices.DeleteFunc(ds, func(x anycast.VIPDrain) bool { return d.VIP == "" || x.VIP == d.VIP }), nil
			}
			return append(slices.DeleteFunc(ds, func(x anycast.VIPDrain) bool { return x.VIP == d.VIP }), d), nil
		})
		if err != nil {
			a.log.Error("anycast: operator drain not changed", "undrain", undrain, "vip", d.VIP, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		a.log.Info("anycast: operator drain changed", "undrain", undrain, "vip", d.VIP, "reason", d.Reason,
			"remote", r.RemoteAddr)
		out := a.drains.list()
		if ann := a.ac.announcer(); ann != nil {
			if err := ann.SetDrains(anycast.DrainOperator, out); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out = ann.Drains()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}
