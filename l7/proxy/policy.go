package proxy

import (
	"fmt"

	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/headerrule"
	"github.com/rampart-edge/rampart/l7/quota"
	"github.com/rampart-edge/rampart/l7/region"
	"github.com/rampart-edge/rampart/l7/stage"
)

// buildPolicies builds the runtime's auth set and quota limiter (carrying
// key caches and buckets over from prev), the screen chain that runs
// before routing, and each route's chain: its policy stages (package
// stage, in their fixed order) and then forward.
func buildPolicies(rt *Runtime, env *runtimeEnv, prev *Runtime) error {
	c := rt.Snap.Config
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
	qo := quota.Options{Logger: env.log,
		Observe: func(policy, outcome string) { m.quota.WithLabelValues(policy, outcome).Inc() }}
	if env.proxy != nil {
		qo.Leases = env.proxy.regional.State // global policies enforce their region's lease
	}
	rt.quota, err = quota.New(c.QuotaPolicies, env.region, prevQuota, qo)
	if err != nil {
		rt.auth.Close()
		return fmt.Errorf("quota policies: %w", err)
	}
	senv := &stage.Env{Snap: rt.Snap, Region: env.region, Log: env.log, Metrics: m.stage, Deny: env.deny,
		Auth: rt.auth, Quota: rt.quota, Table: rt.table, Identity: stage.NewIdentityKeys(c.IdentityHeaders)}
	pol, err := region.Compile(c)
	if err != nil {
		rt.closePolicies()
		return err
	}
	if pol != nil && env.proxy != nil {
		senv.Regional = env.proxy.regional.Bind(pol)
	}
	senv.Handoff = rt.handoff
	rt.screen = stage.Screen(senv)
	for i := range rt.routes {
		rr := &rt.routes[i]
		if rr.headers, err = headerrule.Compile(rr.cfg.Headers); err != nil {
			rt.closePolicies()
			return fmt.Errorf("route %q: %w", rr.cfg.ID, err)
		}
		chain, err := stage.Compile(&stage.Route{Config: rr.cfg, Index: int32(i), Rules: rr.headers}, senv)
		if err != nil {
			rt.closePolicies()
			return err
		}
		rr.fwd = forwardStage{p: env.proxy, rr: rr}
		rr.chain = chain.Then(&rr.fwd)
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
