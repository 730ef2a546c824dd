package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/headerrule"
	"github.com/rampart-edge/rampart/l7/quota"
	"github.com/rampart-edge/rampart/l7/route"
)

// identityKeys are the canonical names of the identity headers: removed
// from every request, set only from a verified identity.
type identityKeys struct {
	tenant, subject, keyID, scopes string
}

func (k identityKeys) strip(h http.Header) {
	delete(h, k.tenant)
	delete(h, k.subject)
	delete(h, k.keyID)
	delete(h, k.scopes)
}

func (k identityKeys) set(h http.Header, id *auth.Identity) {
	if id.Tenant != "" {
		h[k.tenant] = []string{id.Tenant}
	}
	if id.Subject != "" {
		h[k.subject] = []string{id.Subject}
	}
	if id.KeyID != "" {
		h[k.keyID] = []string{id.KeyID}
	}
	if len(id.Scopes) > 0 {
		h[k.scopes] = []string{strings.Join(id.Scopes, " ")}
	}
}

// screen runs before routing: it removes identity headers a client sent
// and refuses a client address on the deny list.
func (p *Proxy) screen(w http.ResponseWriter, r *http.Request, rt *Runtime, log *accesslog.Entry) bool {
	rt.identity.strip(r.Header)
	dl := p.denyList.Load()
	if dl == nil || dl.Len() == 0 {
		return true
	}
	ip := clientAddr(r.RemoteAddr)
	if reason, denied := dl.CheckIP(ip, time.Now()); denied {
		p.metrics.denied.WithLabelValues("cidr").Inc()
		log.Security, log.Err = true, "denied: "+reason
		p.reply(w, log, http.StatusForbidden, "denied")
		return false
	}
	return true
}

func clientAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remote)
	return a.Unmap()
}

// authorize applies the route's policy chain after routing, in the order
// of the design: authentication, the deny list's identities, scopes,
// quota, then the request header rules and the identity headers.
func (f *forwarding) authorize(m *route.Match, rt *Runtime) bool {
	rr, r := f.rr, f.r
	var id auth.Identity
	if rr.auth != nil {
		var err error
		id, err = rr.auth.Authenticate(r.Header)
		if err != nil {
			fail, _ := err.(*auth.Failure)
			status, challenge, reason := http.StatusUnauthorized, "", "authentication failed"
			if fail != nil {
				status, challenge, reason = fail.Status, fail.Challenge, fail.Reason
			}
			f.p.metrics.authFailures.WithLabelValues(rr.cfg.AuthPolicyID, reason).Inc()
			if challenge != "" {
				f.w.Header().Set("WWW-Authenticate", challenge)
			}
			f.refuse(status, reason)
			return false
		}
		f.log.Tenant, f.log.Subject, f.log.KeyID = id.Tenant, id.Subject, id.KeyID
		if dl := f.p.denyList.Load(); dl != nil && dl.Len() > 0 {
			q := deny.Query{KeyID: id.KeyID, JTI: id.JTI, Subject: id.Subject, Tenant: id.Tenant}
			if reason, denied := dl.Check(q, time.Now()); denied {
				f.p.metrics.denied.WithLabelValues("identity").Inc()
				f.log.Err = "denied: " + reason
				f.refuse(http.StatusForbidden, "credential revoked")
				return false
			}
		}
		if !id.HasScopes(rr.cfg.RequiredScopes) {
			f.w.Header().Set("WWW-Authenticate", `Bearer realm="rampart", error="insufficient_scope", scope="`+strings.Join(rr.cfg.RequiredScopes, " ")+`"`)
			f.p.metrics.authFailures.WithLabelValues(rr.cfg.AuthPolicyID, "insufficient scope").Inc()
			f.refuse(http.StatusForbidden, "insufficient scope")
			return false
		}
	}
	if rr.quotaParts != nil {
		src := quotaSource{id: &id, r: r, m: m, names: rt.table.ParamNames(m.Route)}
		var buf [128]byte
		key, _ := quota.BuildKey(rr.quotaParts, &src, buf[:0])
		d := rt.quota.Take(context.Background(), rr.cfg.QuotaPolicyID, key)
		d.SetHeaders(f.w.Header())
		if !d.Allowed {
			f.refuse(http.StatusTooManyRequests, "quota exhausted")
			return false
		}
	}
	rr.headers.ApplyRequest(r.Header)
	if rr.auth != nil {
		rt.identity.set(r.Header, &id)
	}
	return true
}

// refuse answers a request the policy chain stopped; it is a security
// event and the client's fault.
func (f *forwarding) refuse(status int, msg string) {
	f.log.Security = true
	f.fault = faultClient
	f.log.Status = status
	writeError(f.w, status, msg, f.reqID) // keeps WWW-Authenticate, RateLimit-*, Retry-After
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
func (s *quotaSource) ClientIP() string              { return clientIP(s.r.RemoteAddr) }
func (s *quotaSource) Param(name string) (string, bool) {
	for i, n := range s.names {
		if n == name && i < s.m.NParams {
			return s.m.Params[i], true
		}
	}
	return "", false
}

// buildPolicies builds the runtime's auth set and quota limiter (carrying
// key caches and buckets over from prev) and each route's policy links.
func buildPolicies(rt *Runtime, env *runtimeEnv, prev *Runtime) error {
	c := rt.Snap.Config
	ih := c.IdentityHeaders
	rt.identity = identityKeys{tenant: http.CanonicalHeaderKey(ih.Tenant), subject: http.CanonicalHeaderKey(ih.Subject),
		keyID: http.CanonicalHeaderKey(ih.KeyID), scopes: http.CanonicalHeaderKey(ih.Scopes)}
	var prevAuth *auth.Set
	var prevQuota *quota.Limiter
	if prev != nil {
		prevAuth, prevQuota = prev.auth, prev.quota
	}
	var err error
	if rt.auth, err = auth.NewSet(c.AuthPolicies, prevAuth, auth.Options{Logger: env.log}); err != nil {
		return fmt.Errorf("auth policies: %w", err)
	}
	m := env.metrics
	rt.quota, err = quota.New(c.QuotaPolicies, env.region, prevQuota, quota.Options{Logger: env.log,
		Observe: func(policy, outcome string) { m.quota.WithLabelValues(policy, outcome).Inc() }})
	if err != nil {
		rt.auth.Close()
		return fmt.Errorf("quota policies: %w", err)
	}
	quotas := map[string][]string{}
	for _, q := range c.QuotaPolicies {
		quotas[q.ID] = q.Key
	}
	for i := range rt.routes {
		rr := &rt.routes[i]
		if id := rr.cfg.AuthPolicyID; id != "" {
			if rr.auth = rt.auth.Policy(id); rr.auth == nil {
				rt.closePolicies()
				return fmt.Errorf("route %q: auth policy %q was not built", rr.cfg.ID, id)
			}
		}
		if id := rr.cfg.QuotaPolicyID; id != "" {
			rr.quotaParts = quotas[id]
		}
		if rr.headers, err = headerrule.Compile(rr.cfg.Headers); err != nil {
			rt.closePolicies()
			return fmt.Errorf("route %q: %w", rr.cfg.ID, err)
		}
	}
	return nil
}

// closePolicies stops what the runtime's policies run in the background;
// requests still using them keep working with what they have.
func (rt *Runtime) closePolicies() {
	if rt.auth != nil {
		rt.auth.Close()
	}
	if rt.quota != nil {
		_ = rt.quota.Close()
	}
}
