package api

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// NodeURIPrefix starts the URI SAN that names a node in a client
// certificate: spiffe://rampart/node/<id>.
const NodeURIPrefix = "spiffe://rampart/node/"

type principalKey struct{}

func withPrincipal(r *http.Request, p principal) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
}

// nodeGuard lets only node tokens through and keeps who they are for
// speaksFor.
func (a *API) nodeGuard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := a.authenticate(w, r)
		if !ok {
			return
		}
		if p.role != RoleNode {
			writeJSON(w, http.StatusForbidden, errorBody{Error: fmt.Sprintf(
				"token %q (role %s) may not use the node endpoints: a node uses its own token (POST /v1/nodes/{id}/enroll)", p.name, p.role)})
			return
		}
		h(w, withPrincipal(r, p))
	}
}

// speaksFor checks that the request may speak for node id: a per-node
// token only for its own id; a shared node token only for ids that are
// not enrolled; and a verified client certificate naming a node (URI SAN
// spiffe://rampart/node/<id>) only for that node. Otherwise it answers
// 403, lists the refusal, and returns false.
func (a *API) speaksFor(w http.ResponseWriter, r *http.Request, id string) bool {
	p, _ := r.Context().Value(principalKey{}).(principal)
	reason := ""
	if cn, ok := certNode(r); ok && cn != id {
		reason = fmt.Sprintf("the client certificate is node %q's; it may not speak for node %q", cn, id)
	} else if p.node != "" && p.node != id {
		reason = fmt.Sprintf("this token is node %q's; it may not speak for node %q", p.node, id)
	} else if p.node == "" {
		_, err := a.p.NodeCredential(r.Context(), id)
		switch {
		case err == nil:
			reason = fmt.Sprintf("node %q is enrolled: it must use its own token, not the shared token %q", id, p.name)
		case !errors.Is(err, store.ErrNotFound):
			a.fail(w, r, fmt.Errorf("look up node %s: %w", id, err))
			return false
		}
	}
	if reason == "" {
		return true
	}
	a.refused.add(id, "403: "+reason)
	writeJSON(w, http.StatusForbidden, errorBody{Error: reason})
	return false
}

// certNode is the node a verified client certificate names, if any.
func certNode(r *http.Request) (string, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", false
	}
	return certNodeID(r.TLS.VerifiedChains[0][0])
}

func certNodeID(c *x509.Certificate) (string, bool) {
	for _, u := range c.URIs {
		if id, ok := strings.CutPrefix(u.String(), NodeURIPrefix); ok {
			return id, true
		}
	}
	return "", false
}

// Refusal is a refused node request, as the fleet view lists it.
type Refusal struct {
	ID          string    `json:"id"`
	Reason      string    `json:"reason"` // the latest
	LastAttempt time.Time `json:"last_attempt"`
	Count       uint64    `json:"count"`
}

// maxRefusals bounds the refusals kept (the oldest go first).
const maxRefusals = 100

// refusals are this instance's refused node requests by node id.
type refusals struct {
	mu sync.Mutex
	m  map[string]*Refusal
}

func (rs *refusals) add(id, reason string) {
	if id == "" {
		id = "(none)"
	} else if (model.Identity{NodeID: id}).Validate() != nil {
		id = "(invalid)"
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*Refusal{}
	}
	f := rs.m[id]
	if f == nil {
		if len(rs.m) >= maxRefusals {
			var oldest *Refusal
			for _, x := range rs.m {
				if oldest == nil || x.LastAttempt.Before(oldest.LastAttempt) {
					oldest = x
				}
			}
			delete(rs.m, oldest.ID)
		}
		f = &Refusal{ID: id}
		rs.m[id] = f
	}
	f.Reason, f.LastAttempt = reason, time.Now().UTC()
	f.Count++
}

func (rs *refusals) list() []Refusal {
	rs.mu.Lock()
	out := make([]Refusal, 0, len(rs.m))
	for _, f := range rs.m {
		out = append(out, *f)
	}
	rs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].LastAttempt.After(out[j].LastAttempt) })
	return out
}
