package nodeclient

import (
	"fmt"
	"net/http"
	"time"
)

// Control plane reachability states.
const (
	ControlUnknown     = "unknown"     // nothing asked yet
	ControlOK          = "ok"          // the last request was answered
	ControlUnreachable = "unreachable" // no answer, or a 5xx
	ControlRefused     = "refused"     // answered with 4xx (a bad or revoked token, say)
)

// ControlState says whether the node reaches its control plane; the
// proxy shows it in /status under "control".
type ControlState struct {
	URL       string    `json:"url"`
	State     string    `json:"state"`     // ok, unreachable, refused, unknown
	Reachable bool      `json:"reachable"` // answered (ok or refused)
	LastError string    `json:"last_error,omitempty"`
	Since     time.Time `json:"since"` // when State last changed
	// LastContact is the last answer from the control plane.
	LastContact time.Time `json:"last_contact,omitzero"`
	// Failures counts the requests in a row that got no answer or a 5xx
	// (0 once one is answered): retries going on show as it grows.
	Failures int `json:"failures"`
}

// Control is the node's view of its control plane.
func (cl *Client) Control() ControlState {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.ctl
}

// contact records the outcome of a request to the control plane (resp
// nil when none came back) and logs state changes: WARN when it becomes
// unreachable or refuses the node (once, until the state changes), INFO
// when it answers again.
func (cl *Client) contact(what string, resp *http.Response, err error) {
	state, msg := ControlOK, ""
	switch {
	case err != nil && resp == nil:
		state, msg = ControlUnreachable, fmt.Sprintf("%s: %v", what, err)
	case resp.StatusCode >= 500:
		state, msg = ControlUnreachable, fmt.Sprintf("%s: %s", what, resp.Status)
	case resp.StatusCode >= 400:
		state, msg = ControlRefused, fmt.Sprintf("%s: %s", what, resp.Status)
	}
	now := time.Now().UTC()
	cl.mu.Lock()
	prev := cl.ctl.State
	if state != prev {
		cl.ctl.Since = now
	}
	cl.ctl.State, cl.ctl.Reachable = state, state == ControlOK || state == ControlRefused
	if resp != nil {
		cl.ctl.LastContact = now
	}
	if state == ControlUnreachable {
		cl.ctl.Failures++
	} else {
		cl.ctl.Failures = 0
	}
	if msg != "" {
		cl.ctl.LastError = msg
	}
	cl.mu.Unlock()
	if state == prev {
		return
	}
	switch state {
	case ControlUnreachable:
		cl.log.Warn("control plane unreachable: serving the snapshot and deny list we have; retrying", "url", cl.c.URL, "err", msg)
	case ControlRefused:
		cl.log.Warn("control plane refuses this node", "url", cl.c.URL, "err", msg)
	default:
		cl.log.Info("control plane reachable", "url", cl.c.URL, "was", prev)
	}
}
