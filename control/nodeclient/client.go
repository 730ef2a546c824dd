// Package nodeclient is the node side of the control plane: it long-polls
// the control plane for the snapshot its rollout stage allows, verifies
// it, hands it to the proxy by writing it atomically into the proxy's
// snapshot directory (the proxy swaps it in memory and keeps it as its
// last-known-good), follows the deny channel the same way into the
// proxy's deny file, the region-state channel into the proxy's
// region-state file and the cache purge channel into the proxy's purge
// file, and reports the node's versions and health (with
// its upstream clusters' endpoint health and, given the agent's admin
// URL, the VIP prefixes its anycast agent announces).
//
// It never goes back: a snapshot whose version is not newer than the one
// it has (an older epoch included) and a deny list whose sequence is not
// higher are refused, counted and reported. When the control plane is
// unreachable it retries with backoff and the files stay as they are, so
// the proxy keeps serving.
package nodeclient

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Config of a node client.
type Config struct {
	URL       string // control plane base URL, e.g. https://control.example:9443
	Token     string // bearer token with the node role
	Identity  model.Identity
	PublicKey ed25519.PublicKey // verifies snapshots and deny lists

	SnapshotDir string // the proxy's -snapshot-dir: <epoch>-<sequence>.snap files are written here
	DenyFile    string // the proxy's -deny-file; "" leaves the deny channel alone
	// RegionStateFile is the proxy's -region-state file (the agent may
	// read the same file); "" leaves the region state alone.
	RegionStateFile string
	// PurgeFile is the proxy's -purge-file (the cache purge document);
	// "" leaves the purge channel alone.
	PurgeFile string
	// AgentStatusURL is the anycast agent's admin listener
	// (http://127.0.0.1:9902); when set, each report says which VIP
	// prefixes the agent announces, every VIP's state and reason and the
	// min-sites guard (its /anycast/status).
	AgentStatusURL string

	// AdminURL is the proxy's admin listener (http://127.0.0.1:9901),
	// read for /status and /metrics; Reporter, when set, is used instead.
	AdminURL string
	Reporter func(context.Context) (Observation, error)

	ReportInterval time.Duration // default 5s
	WatchTimeout   time.Duration // long-poll wait asked of the server; default 30s
	MinBackoff     time.Duration // after an error; default 200ms, doubling...
	MaxBackoff     time.Duration // ...up to this; default 10s
	KeepSnapshots  int           // snapshot files kept in SnapshotDir; default 2
	// After a hand-over the proxy is asked every SwapPoll (default 50ms),
	// for up to SwapWait (default 5s), whether it swapped the version in
	// or refused it; the report goes out as soon as it did either.
	SwapPoll, SwapWait time.Duration
	HTTPClient         *http.Client // default: a client without a global timeout
	Logger             *slog.Logger
}

// Observation is what the node's proxy says about itself: the active
// version, readiness, and cumulative counters (since the proxy started).
type Observation struct {
	Active snapshot.Version
	Ready  bool
	// Requests served, and Errors among them that were the gateway's or
	// the upstream's fault (rampart_request_errors_total).
	Requests, Errors uint64
	// LatencySeconds and LatencyCount are the request duration
	// histogram's sum and count.
	LatencySeconds float64
	LatencyCount   uint64
	// Refused is the last snapshot version the proxy refused to run (a
	// certificate file missing on the node, say), and RefusedReason why.
	Refused       snapshot.Version
	RefusedReason string
	// Clusters is the upstream clusters' endpoint health
	// (rampart_endpoint_healthy), sorted by name.
	Clusters []model.ClusterHealth
	// QuotaAttempts counts, per quota policy, the requests the proxy
	// tried to admit (allowed and limited) since it started.
	QuotaAttempts map[string]uint64
}

// Client runs the node side.
type Client struct {
	c   Config
	log *slog.Logger

	mu           sync.Mutex
	st           model.Status // what is reported; versions kept current
	base         Observation  // counters when the active version last changed
	report       chan struct{}
	ctl          ControlState     // reach.go
	handed       snapshot.Version // handed over, not yet seen active or refused (report.go: awaitSwap)
	proxyRefused snapshot.Version // the proxy's last refusal, already reported
	// regionVersion is the region-state document handed over last
	// (regionstate.go).
	regionVersion envelope.Version
	// purgeVersion is the purge document handed over last (purge.go).
	purgeVersion envelope.Version
	demand       demandMeter // report.go: quota demand rates
}

// New checks the config and reads what the node already has: the newest
// valid snapshot in SnapshotDir and the deny file's sequence.
func New(c Config) (*Client, error) {
	if c.URL == "" || c.SnapshotDir == "" {
		return nil, errors.New("nodeclient: URL and SnapshotDir are required")
	}
	if len(c.PublicKey) != ed25519.PublicKeySize {
		return nil, errors.New("nodeclient: an Ed25519 public key is required")
	}
	if err := c.Identity.Validate(); err != nil {
		return nil, fmt.Errorf("nodeclient: identity: %w", err)
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.ReportInterval <= 0 {
		c.ReportInterval = 5 * time.Second
	}
	if c.WatchTimeout <= 0 {
		c.WatchTimeout = 30 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 200 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(10*time.Second, c.MinBackoff)
	}
	if c.KeepSnapshots <= 0 {
		c.KeepSnapshots = 2
	}
	if c.SwapPoll <= 0 {
		c.SwapPoll = 50 * time.Millisecond
	}
	if c.SwapWait <= 0 {
		c.SwapWait = 5 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := os.MkdirAll(c.SnapshotDir, 0o755); err != nil {
		return nil, fmt.Errorf("nodeclient: snapshot dir: %w", err)
	}
	cl := &Client{c: c, log: c.Logger.With("node", c.Identity.NodeID), report: make(chan struct{}, 1)}
	cl.st.Identity = c.Identity
	cl.ctl = ControlState{URL: c.URL, State: ControlUnknown, Since: time.Now().UTC()}
	cl.st.Downloaded = cl.newestOnDisk()
	if c.DenyFile != "" {
		if err := os.MkdirAll(filepath.Dir(c.DenyFile), 0o755); err != nil {
			return nil, fmt.Errorf("nodeclient: deny file dir: %w", err)
		}
		if data, err := os.ReadFile(c.DenyFile); err == nil {
			if l, err := deny.Parse(data, c.PublicKey); err == nil {
				cl.st.DenySequence = l.Sequence()
			}
		}
	}
	if c.RegionStateFile != "" {
		if err := os.MkdirAll(filepath.Dir(c.RegionStateFile), 0o755); err != nil {
			return nil, fmt.Errorf("nodeclient: region state file dir: %w", err)
		}
		if data, err := os.ReadFile(c.RegionStateFile); err == nil {
			if s, err := regionstate.Parse(data, c.PublicKey); err == nil {
				cl.regionVersion = s.Version
				cl.st.RegionState = s.Version.String()
			}
		}
	}
	if c.PurgeFile != "" {
		if err := os.MkdirAll(filepath.Dir(c.PurgeFile), 0o755); err != nil {
			return nil, fmt.Errorf("nodeclient: purge file dir: %w", err)
		}
		if data, err := os.ReadFile(c.PurgeFile); err == nil {
			if d, err := purge.Parse(data, c.PublicKey); err == nil {
				cl.purgeVersion = d.Version
				cl.st.Purge = d.Version.String()
			}
		}
	}
	return cl, nil
}

// Run starts a client and runs it until ctx ends.
func Run(ctx context.Context, c Config) error {
	cl, err := New(c)
	if err != nil {
		return err
	}
	return cl.Run(ctx)
}

// Run follows the snapshot and deny channels and reports until ctx ends.
func (cl *Client) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); cl.watchSnapshots(ctx) }()
	go func() { defer wg.Done(); cl.reportLoop(ctx) }()
	if cl.c.DenyFile != "" {
		wg.Add(1)
		go func() { defer wg.Done(); cl.watchDeny(ctx) }()
	}
	if cl.c.RegionStateFile != "" {
		wg.Add(1)
		go func() { defer wg.Done(); cl.watchRegionState(ctx) }()
	}
	if cl.c.PurgeFile != "" {
		wg.Add(1)
		go func() { defer wg.Done(); cl.watchPurge(ctx) }()
	}
	wg.Wait()
	return nil
}

// Status is the last status the client built (what it reports).
func (cl *Client) Status() model.Status {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.st
}

// newestOnDisk is the version of the newest snapshot file in the
// directory that verifies (whoever wrote it: the proxy serves the newest).
func (cl *Client) newestOnDisk() snapshot.Version {
	var best snapshot.Version
	ents, _ := os.ReadDir(cl.c.SnapshotDir)
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".snap") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(cl.c.SnapshotDir, e.Name()))
		if err != nil {
			continue
		}
		if s, err := snapshot.Parse(data, cl.c.PublicKey); err == nil && best.Less(s.Version) {
			best = s.Version
		}
	}
	return best
}

type snapFile struct {
	name string
	v    snapshot.Version
}

// snapFiles lists the <epoch>-<sequence>.snap files this client writes.
func (cl *Client) snapFiles() []snapFile {
	ents, _ := os.ReadDir(cl.c.SnapshotDir)
	var out []snapFile
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".snap")
		if !ok || e.IsDir() {
			continue
		}
		v, err := model.ParseVersion(strings.Replace(base, "-", ".", 1))
		if err == nil && fileName(v) == e.Name() {
			out = append(out, snapFile{e.Name(), v})
		}
	}
	return out
}

func fileName(v snapshot.Version) string { return fmt.Sprintf("%d-%d.snap", v.Epoch, v.Sequence) }

func (cl *Client) poke() {
	select {
	case cl.report <- struct{}{}:
	default:
	}
}

// refuse counts and reports something the node would not take: a
// snapshot of version v (zero: unknown, or a deny list).
func (cl *Client) refuse(what string, v snapshot.Version, err error) {
	cl.mu.Lock()
	cl.st.Refused++
	cl.st.LastError = clip(fmt.Sprintf("refused %s: %v", what, err))
	if v != (snapshot.Version{}) {
		cl.st.RefusedVersion, cl.st.RefusedReason = v, clip(err.Error())
	}
	cl.mu.Unlock()
	cl.log.Warn("refused", "what", what, "version", v.String(), "err", err)
	cl.poke()
}

// TLSClient returns an HTTP client for a control plane served over TLS:
// caFile verifies its certificate ("" trusts the system roots); certFile
// and keyFile, when set, are the node's client certificate (mTLS).
func TLSClient(caFile, certFile, keyFile string) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("nodeclient: control CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("nodeclient: %s holds no PEM certificate", caFile)
		}
	}
	if certFile != "" || keyFile != "" {
		crt, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("nodeclient: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{crt}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}

// clip bounds a text the report carries (the control plane takes at most
// 2048 bytes).
func clip(s string) string {
	if len(s) <= 1024 {
		return s
	}
	return strings.ToValidUTF8(s[:1021], "") + "..."
}
