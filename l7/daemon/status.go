package daemon

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/regionwatch"
	"github.com/rampart-edge/rampart/l7/snapdir"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Status is the admin /status of a proxy process: the proxy's own
// status, and what this node adds: where its listeners are bound, the
// last snapshot it refused, and whether it reaches its control plane.
type Status struct {
	proxy.Status
	Listeners   []ListenerStatus `json:"listeners"`
	LastRefusal *RefusalStatus   `json:"last_refusal,omitempty"`
	Control     any              `json:"control,omitempty"` // Config.ControlStatus
	// RegionState is the region-state document in force and whether it is
	// fresh (absent without -region-state).
	RegionState *regionwatch.Status `json:"region_state,omitempty"`
	// PID and StartedAt are this process's: a graceful re-exec (SIGHUP)
	// changes both.
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// Upgrade is the last graceful re-exec this process tried
	// (Config.UpgradeStatus; absent without it).
	Upgrade any `json:"upgrade,omitempty"`
}

// processStart is when this process started (near enough: package init).
var processStart = time.Now().UTC()

// ListenerStatus is one listener of the active snapshot on this node.
type ListenerStatus struct {
	Name    string `json:"name"`
	Address string `json:"address"` // what this node listens on (port 0 stays 0)
	// SnapshotAddress is the snapshot's address when a node-local
	// override (-listen-override) replaced it.
	SnapshotAddress string `json:"snapshot_address,omitempty"`
	Bound           string `json:"bound,omitempty"` // the bound address, port resolved
}

// RefusalStatus is the last snapshot file the proxy refused.
type RefusalStatus struct {
	Version string    `json:"version"` // epoch.sequence; 0.0 when unreadable
	Reason  string    `json:"reason"`
	Error   string    `json:"error"`
	File    string    `json:"file"`
	At      time.Time `json:"at"`
}

func nodeStatus(p *proxy.Proxy, w *snapdir.Watcher, ov *overrides, rs *regionwatch.Watcher, control func() any) Status {
	st := Status{Status: p.Status(), Listeners: []ListenerStatus{}, PID: os.Getpid(), StartedAt: processStart}
	if rt := p.Active(); rt != nil {
		for _, l := range rt.Snap.Config.Listeners {
			ls := ListenerStatus{Name: l.Name, Address: l.Address}
			if to, from, ok := ov.replaced(l.Name); ok {
				ls.Address, ls.SnapshotAddress = to, from
			}
			if a, ok := p.ListenerAddr(l.Name); ok {
				ls.Bound = a.String()
			}
			st.Listeners = append(st.Listeners, ls)
		}
	}
	if r := w.LastRefusal(); r != nil {
		st.LastRefusal = &RefusalStatus{Version: r.Version.String(), Reason: r.Reason, Error: r.Error, File: r.File, At: r.At}
	}
	if rs != nil {
		rst := rs.Status()
		st.RegionState = &rst
	}
	if control != nil {
		st.Control = control()
	}
	return st
}

// adminHandler is the proxy's admin handler with /status replaced by the
// node's.
func adminHandler(p *proxy.Proxy, status func() Status) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", p.AdminHandler())
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(status())
	})
	return mux
}

// overrides are node-local listener addresses by listener name, and the
// snapshot's addresses they replaced in the snapshot applied last.
type overrides struct {
	to   map[string]string
	mu   sync.Mutex
	from map[string]string
}

func (o *overrides) replaced(name string) (to, from string, ok bool) {
	if to, ok = o.to[name]; !ok {
		return "", "", false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return to, o.from[name], true
}

// ParseListenOverrides reads NAME=ADDR pairs (the -listen-override flag).
func ParseListenOverrides(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		name, addr, ok := strings.Cut(p, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("listen override %q is not NAME=ADDRESS", p)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listen override for listener %q given twice", name)
		}
		out[name] = addr
	}
	return out, nil
}

// overrideTarget applies node-local listener addresses to every snapshot
// before the proxy sees it (the verified file itself is unchanged).
type overrideTarget struct {
	*proxy.Proxy
	ov  *overrides
	log *slog.Logger
}

func (t overrideTarget) Apply(s *snapshot.Snapshot) error {
	if len(t.ov.to) == 0 {
		return t.Proxy.Apply(s)
	}
	cfg := *s.Config
	cfg.Listeners = slices.Clone(cfg.Listeners)
	from := map[string]string{}
	for i, l := range cfg.Listeners {
		if to, ok := t.ov.to[l.Name]; ok {
			from[l.Name] = l.Address
			cfg.Listeners[i].Address = to
		}
	}
	for name := range t.ov.to {
		if _, ok := from[name]; !ok {
			t.log.Warn("listen override names no listener of the snapshot", "listener", name, "version", s.Version.String())
		}
	}
	c := *s
	c.Config = &cfg
	if err := t.Proxy.Apply(&c); err != nil {
		return err
	}
	t.ov.mu.Lock()
	t.ov.from = from
	t.ov.mu.Unlock()
	return nil
}
