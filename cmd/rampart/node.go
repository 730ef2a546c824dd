package main

import (
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
)

// nodeFlags are the node-side flags of `rampart proxy`: when -control-url
// is set, the proxy follows a control plane (watch, verify, hand over,
// report).
type nodeFlags struct {
	url, tokenFile, nodeID, zone, cohort, ca, cert, key *string
	regionStateFile, agentStatusURL                     *string
}

func addNodeFlags(fs *flag.FlagSet) nodeFlags {
	host, _ := os.Hostname()
	return nodeFlags{
		url:       fs.String("control-url", "", "control plane URL; when set, snapshots, the deny list, the region state and cache purges come from it"),
		tokenFile: fs.String("control-token-file", "", "file holding the node's bearer token"),
		nodeID:    fs.String("node-id", host, "this node's id at the control plane"),
		zone:      fs.String("zone", "", "this node's zone (rollout stages)"),
		cohort:    fs.String("cohort", "", "this node's cohort (rollout stages, e.g. canary)"),
		ca:        fs.String("control-ca", "", "CA file for the control plane's certificate"),
		cert:      fs.String("control-cert", "", "client certificate for mTLS to the control plane"),
		key:       fs.String("control-key", "", "client key for mTLS to the control plane"),
		regionStateFile: fs.String("control-region-state-file", "", "where the region-state document from the control plane is written "+
			"(default: the -region-state file; with -control-url and neither set, <state-dir>/region-state.json for both)"),
		agentStatusURL: fs.String("agent-status-url", "", "the anycast agent's admin URL (http://127.0.0.1:9902): reports say which VIP prefixes it announces"),
	}
}

// config builds the node client's config; ok is false when no control
// plane is configured.
func (n nodeFlags) config(pub ed25519.PublicKey, region, snapDir, denyFile, purgeFile string) (nodeclient.Config, bool, error) {
	if *n.url == "" {
		return nodeclient.Config{}, false, nil
	}
	tok, err := os.ReadFile(*n.tokenFile)
	if err != nil {
		return nodeclient.Config{}, false, fmt.Errorf("control token: %w", err)
	}
	var hc *http.Client
	if *n.ca != "" || *n.cert != "" {
		if hc, err = nodeclient.TLSClient(*n.ca, *n.cert, *n.key); err != nil {
			return nodeclient.Config{}, false, err
		}
	}
	return nodeclient.Config{URL: *n.url, Token: strings.TrimSpace(string(tok)), PublicKey: pub,
		Identity:    model.Identity{NodeID: *n.nodeID, Region: region, Zone: *n.zone, Cohort: *n.cohort},
		SnapshotDir: snapDir, DenyFile: denyFile, PurgeFile: purgeFile, HTTPClient: hc,
		RegionStateFile: *n.regionStateFile, AgentStatusURL: *n.agentStatusURL}, true, nil
}

// nodeClient is the proxy's control plane client, once started.
type nodeClient struct {
	c atomic.Pointer[nodeclient.Client]
}

// start runs the node client until ctx ends, reading the proxy's admin
// listener for status.
func (n *nodeClient) start(ctx context.Context, c nodeclient.Config, admin string) {
	c.AdminURL = "http://" + admin
	cl, err := nodeclient.New(c)
	if err != nil {
		slog.Error("control plane client not started", "err", err)
		return
	}
	n.c.Store(cl)
	go func() {
		if err := cl.Run(ctx); err != nil && ctx.Err() == nil {
			slog.Error("control plane client stopped", "err", err)
		}
	}()
}

// status is the client's view of its control plane for /status (nil
// without a control plane).
func (n *nodeClient) status() any {
	if cl := n.c.Load(); cl != nil {
		return cl.Control()
	}
	return nil
}
