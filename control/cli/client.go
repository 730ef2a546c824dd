// Package cli is the operator's side of the control plane API: a typed
// client (Client) and the `rampart control` subcommands built on it
// (Main) — submit, diff, rollout, revisions, fleet, deny, nodes — with
// human tables by default and the API's JSON with -o json.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Client calls the control plane's HTTP API.
type Client struct {
	Server string // base URL, e.g. http://127.0.0.1:9080
	Token  string // bearer token
	HTTP   *http.Client
}

// APIError is an answer other than 2xx: the status and the API's error
// and problems.
type APIError struct {
	Method, Path string
	Status       string
	Code         int
	Message      string
	Problems     []string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", e.Method, e.Path, e.Status)
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	for _, p := range e.Problems {
		b.WriteString("\n  - " + p)
	}
	return b.String()
}

// do sends a request and decodes a 2xx JSON answer into out (when set);
// raw, when set, receives the answer's bytes.
func (c *Client) do(ctx context.Context, method, path, ctype string, body []byte, out any, raw *[]byte) error {
	return c.send(ctx, method, path, ctype, "", body, out, raw)
}

func (c *Client) send(ctx context.Context, method, path, ctype, idemKey string, body []byte, out any, raw *[]byte) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Server, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Method: method, Path: path, Status: resp.Status, Code: resp.StatusCode}
		var eb struct {
			Error    string   `json:"error"`
			Problems []string `json:"problems"`
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			e.Message, e.Problems = eb.Error, eb.Problems
		} else {
			e.Message = strings.TrimSpace(string(data))
		}
		return e
	}
	if raw != nil {
		*raw = data
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

func (c *Client) get(ctx context.Context, path string, out any, raw *[]byte) error {
	return c.do(ctx, http.MethodGet, path, "", nil, out, raw)
}

func (c *Client) post(ctx context.Context, path string, in, out any, raw *[]byte) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	return c.do(ctx, http.MethodPost, path, "application/json", body, out, raw)
}

// Rollout is a rollout as the API shows it.
type Rollout struct {
	model.Rollout
	QueuedBehind string `json:"queued_behind,omitempty"`
}

// RevisionDetail is a revision with its rollout.
type RevisionDetail struct {
	model.Revision
	Rollout *Rollout `json:"rollout,omitempty"`
}

// FleetNode is one node of the fleet view.
type FleetNode struct {
	model.Node
	Stage           string           `json:"stage,omitempty"`
	Assigned        string           `json:"assigned,omitempty"`
	AssignedVersion snapshot.Version `json:"assigned_version"`
	Live            bool             `json:"live"`
	Converged       bool             `json:"converged"`
	AgeSeconds      float64          `json:"last_seen_seconds_ago"`
}

// Fleet is the fleet view.
type Fleet struct {
	Stable        string           `json:"stable,omitempty"`
	StableVersion snapshot.Version `json:"stable_version"`
	Rolling       string           `json:"rolling,omitempty"`
	Nodes         []FleetNode      `json:"nodes"`
}

// EnrolledNode is a node known to the control plane by enrolment.
type EnrolledNode struct {
	ID         string    `json:"id"`
	Token      string    `json:"token,omitempty"` // only in the answer to enroll
	EnrolledAt time.Time `json:"enrolled_at"`
	RevokedAt  time.Time `json:"revoked_at,omitzero"`
	LastSeen   time.Time `json:"last_seen,omitzero"`
}

// Submit posts a config (YAML, or JSON when ctype says so); key, when
// set, is the Idempotency-Key (the same key again returns the same
// revision).
func (c *Client) Submit(ctx context.Context, body []byte, ctype, message, key string, raw *[]byte) (*model.Revision, error) {
	path := "/v1/revisions"
	if message != "" {
		path += "?message=" + url.QueryEscape(message)
	}
	var rev model.Revision
	return &rev, c.send(ctx, http.MethodPost, path, ctype, key, body, &rev, raw)
}

// Revisions lists up to limit revisions, newest first.
func (c *Client) Revisions(ctx context.Context, limit int, raw *[]byte) ([]model.Revision, error) {
	var out struct {
		Revisions []model.Revision `json:"revisions"`
	}
	err := c.get(ctx, fmt.Sprintf("/v1/revisions?limit=%d", limit), &out, raw)
	return out.Revisions, err
}

// Revision returns a revision and its rollout.
func (c *Client) Revision(ctx context.Context, id string, raw *[]byte) (*RevisionDetail, error) {
	var out RevisionDetail
	return &out, c.get(ctx, "/v1/revisions/"+url.PathEscape(id), &out, raw)
}

// Diff compares two revisions.
func (c *Client) Diff(ctx context.Context, from, to string, raw *[]byte) (*model.Diff, error) {
	var out model.Diff
	return &out, c.get(ctx, "/v1/diff?from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to), &out, raw)
}

// Rollouts lists rollouts (open: pending and staging only).
func (c *Client) Rollouts(ctx context.Context, open bool, limit int, raw *[]byte) ([]Rollout, error) {
	var out struct {
		Rollouts []Rollout `json:"rollouts"`
	}
	path := fmt.Sprintf("/v1/rollouts?limit=%d", limit)
	if open {
		path += "&open=1"
	}
	err := c.get(ctx, path, &out, raw)
	return out.Rollouts, err
}

// Rollout returns one rollout.
func (c *Client) Rollout(ctx context.Context, id string, raw *[]byte) (*Rollout, error) {
	var out Rollout
	return &out, c.get(ctx, "/v1/rollouts/"+url.PathEscape(id), &out, raw)
}

// Steer pauses, resumes or aborts a rollout.
func (c *Client) Steer(ctx context.Context, id, action, reason string, raw *[]byte) (*Rollout, error) {
	var out Rollout
	var in any
	if reason != "" {
		in = map[string]string{"reason": reason}
	}
	return &out, c.post(ctx, "/v1/rollouts/"+url.PathEscape(id)+"/"+action, in, &out, raw)
}

// Fleet returns the fleet view.
func (c *Client) Fleet(ctx context.Context, raw *[]byte) (*Fleet, error) {
	var out Fleet
	return &out, c.get(ctx, "/v1/fleet", &out, raw)
}

// Deny returns the deny list in force.
func (c *Client) Deny(ctx context.Context, raw *[]byte) (*model.DenyState, error) {
	var out model.DenyState
	return &out, c.get(ctx, "/v1/deny", &out, raw)
}

// DenyAdd adds entries: the YAML or JSON list `rampart deny build` reads.
func (c *Client) DenyAdd(ctx context.Context, list []byte, raw *[]byte) (*model.DenyState, error) {
	var out model.DenyState
	return &out, c.do(ctx, http.MethodPost, "/v1/deny/entries", "application/yaml", list, &out, raw)
}

// DenyRemove removes an entry at once (POST /v1/deny/expire).
func (c *Client) DenyRemove(ctx context.Context, kind, value string, raw *[]byte) (*model.DenyState, error) {
	var out model.DenyState
	return &out, c.post(ctx, "/v1/deny/expire", map[string]string{"kind": kind, "value": value}, &out, raw)
}

// Enroll enrols a node and returns its token (shown once).
func (c *Client) Enroll(ctx context.Context, id string, raw *[]byte) (*EnrolledNode, error) {
	var out EnrolledNode
	return &out, c.post(ctx, "/v1/nodes/"+url.PathEscape(id)+"/enroll", nil, &out, raw)
}

// Revoke revokes a node's enrolment.
func (c *Client) Revoke(ctx context.Context, id string) error {
	return c.post(ctx, "/v1/nodes/"+url.PathEscape(id)+"/revoke", nil, nil, nil)
}

// Nodes lists the enrolled nodes.
func (c *Client) Nodes(ctx context.Context, raw *[]byte) ([]EnrolledNode, error) {
	var out struct {
		Nodes []EnrolledNode `json:"nodes"`
	}
	err := c.get(ctx, "/v1/nodes", &out, raw)
	return out.Nodes, err
}
