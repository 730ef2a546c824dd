package stage

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/deny"
)

func init() {
	register(SlotAuth, buildAuth)
	register(SlotDenyIdentity, buildDenyIdentity)
	register(SlotScopes, buildScopes)
}

// authStage authenticates with the route's auth policy; a failure is the
// policy's status (401 by default) with its challenge, counted in
// rampart_auth_failures_total{policy, reason}.
type authStage struct {
	policy  *auth.Policy
	id      string
	metrics *Metrics
}

func buildAuth(r *Route, env *Env) (Stage, error) {
	id := r.Config.AuthPolicyID
	if id == "" {
		return nil, nil
	}
	p := env.Auth.Policy(id)
	if p == nil {
		return nil, fmt.Errorf("auth policy %q %w", id, errNotBuilt)
	}
	return &authStage{policy: p, id: id, metrics: env.Metrics}, nil
}

func (*authStage) Name() string { return "auth" }

func (s *authStage) Serve(x *Exchange) Verdict {
	id, err := s.policy.Authenticate(x.R.Header)
	if err != nil {
		fail, _ := err.(*auth.Failure)
		status, challenge, reason := http.StatusUnauthorized, "", "authentication failed"
		if fail != nil {
			status, challenge, reason = fail.Status, fail.Challenge, fail.Reason
		}
		s.metrics.AuthFailures.WithLabelValues(s.id, reason).Inc()
		if challenge != "" {
			x.W.Header().Set("WWW-Authenticate", challenge)
		}
		return x.Refuse(status, reason)
	}
	x.Identity = id
	x.Log.Tenant, x.Log.Subject, x.Log.KeyID = id.Tenant, id.Subject, id.KeyID
	return Continue
}

// denyIdentity refuses a verified identity on the deny list (403,
// rampart_denied_total{match="identity"}); routes that authenticate only.
type denyIdentity struct{ env *Env }

func buildDenyIdentity(r *Route, env *Env) (Stage, error) {
	if r.Config.AuthPolicyID == "" {
		return nil, nil
	}
	return &denyIdentity{env: env}, nil
}

func (*denyIdentity) Name() string { return "deny_identity" }

func (s *denyIdentity) Serve(x *Exchange) Verdict {
	dl := s.env.Deny.Load()
	if dl == nil || dl.Len() == 0 {
		return Continue
	}
	id := &x.Identity
	q := deny.Query{KeyID: id.KeyID, JTI: id.JTI, Subject: id.Subject, Tenant: id.Tenant}
	if reason, denied := dl.Check(q, time.Now()); denied {
		s.env.Metrics.Denied.WithLabelValues("identity").Inc()
		x.Log.Err = "denied: " + reason
		return x.Refuse(http.StatusForbidden, "credential revoked")
	}
	return Continue
}

// scopes refuses an identity without every required scope (403 with an
// insufficient_scope challenge); routes with required_scopes only.
type scopes struct {
	required  []string
	challenge string
	policy    string
	metrics   *Metrics
}

func buildScopes(r *Route, env *Env) (Stage, error) {
	if r.Config.AuthPolicyID == "" || len(r.Config.RequiredScopes) == 0 {
		return nil, nil
	}
	return &scopes{required: r.Config.RequiredScopes, policy: r.Config.AuthPolicyID, metrics: env.Metrics,
		challenge: `Bearer realm="rampart", error="insufficient_scope", scope="` + strings.Join(r.Config.RequiredScopes, " ") + `"`}, nil
}

func (*scopes) Name() string { return "scopes" }

func (s *scopes) Serve(x *Exchange) Verdict {
	if x.Identity.HasScopes(s.required) {
		return Continue
	}
	x.W.Header().Set("WWW-Authenticate", s.challenge)
	s.metrics.AuthFailures.WithLabelValues(s.policy, "insufficient scope").Inc()
	return x.Refuse(http.StatusForbidden, "insufficient scope")
}
