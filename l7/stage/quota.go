package stage

import (
	"context"
	"net/http"

	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/quota"
	"github.com/rampart-edge/rampart/l7/route"
)

func init() { register(SlotQuota, buildQuota) }

// quotaStage takes a token from the route's quota policy for the key its
// parts build from the request (and the identity, when there is one);
// RateLimit-* headers go on every answer, 429 when the quota is spent.
type quotaStage struct {
	limiter *quota.Limiter
	policy  string
	parts   []string
	params  []string // the route template's parameter names
}

func buildQuota(r *Route, env *Env) (Stage, error) {
	id := r.Config.QuotaPolicyID
	if id == "" {
		return nil, nil
	}
	if env.quotaKeys == nil {
		env.quotaKeys = map[string][]string{}
		for _, q := range env.Snap.Config.QuotaPolicies {
			env.quotaKeys[q.ID] = q.Key
		}
	}
	parts := env.quotaKeys[id]
	if parts == nil {
		return nil, nil // as before the stages: a quota policy without key parts takes nothing
	}
	return &quotaStage{limiter: env.Quota, policy: id, parts: parts, params: env.Table.ParamNames(r.Index)}, nil
}

func (*quotaStage) Name() string { return "quota" }

func (s *quotaStage) Serve(x *Exchange) Verdict {
	src := quotaSource{id: &x.Identity, r: x.R, m: x.Match, names: s.params}
	var buf [128]byte
	key, _ := quota.BuildKey(s.parts, &src, buf[:0])
	d := s.limiter.Take(context.Background(), s.policy, key)
	d.SetHeaders(x.W.Header())
	if !d.Allowed {
		return x.Refuse(http.StatusTooManyRequests, "quota exhausted")
	}
	return Continue
}

// quotaSource gives quota.BuildKey the parts of one request.
type quotaSource struct {
	id    *auth.Identity
	r     *http.Request
	m     *route.Match
	names []string
}

func (s *quotaSource) Tenant() string                { return s.id.Tenant }
func (s *quotaSource) KeyID() string                 { return s.id.KeyID }
func (s *quotaSource) Claim(n string) (string, bool) { return s.id.Claim(n) }
func (s *quotaSource) Header(name string) string     { return s.r.Header.Get(name) }
func (s *quotaSource) ClientIP() string              { return ClientIP(s.r.RemoteAddr) }
func (s *quotaSource) Param(name string) (string, bool) {
	for i, n := range s.names {
		if n == name && i < s.m.NParams {
			return s.m.Params[i], true
		}
	}
	return "", false
}
