package stage

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/region"
)

func init() { register(SlotRegional, buildRegional) }

// regional is the regional routing stage of a route with a platform: it
// decides which region may serve the request (l7/region), records the
// decision in the access log and rampart_region_decisions_total{route,
// reason}, and narrows Exchange.Regions to the target region, or answers
// 503 (fail closed) with nothing but the request id when no region may.
type regional struct {
	b       *region.Binding
	rule    *region.Rule
	hint    string // canonical hint header name
	local   int    // the proxy's region index, -1 when unknown
	filters []cluster.Filter
	counts  [region.NumReasons]prometheus.Counter
}

// decisionsVec is rampart_region_decisions_total; route ids and the fixed
// reason codes bound its labels.
func decisionsVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rampart_region_decisions_total",
		Help: "Regional routing decisions of routes with a platform, by route and reason code.",
	}, []string{"route", "reason"})
}

func buildRegional(r *Route, env *Env) (Stage, error) {
	if env.Regional == nil {
		return nil, nil
	}
	p := env.Regional.Policy()
	rule := p.Rule(r.Config.ID)
	if rule == nil {
		return nil, nil
	}
	s := &regional{b: env.Regional, rule: rule, hint: http.CanonicalHeaderKey(p.HintHeader()), local: p.Index(env.Region)}
	for _, name := range p.Regions() {
		s.filters = append(s.filters, oneRegion{name})
	}
	vec := env.Metrics.Register(decisionsVec()).(*prometheus.CounterVec)
	for _, reason := range region.Reasons() {
		s.counts[reason] = vec.WithLabelValues(r.Config.ID, reason.String())
	}
	return s, nil
}

func (*regional) Name() string { return "regional" }

func (s *regional) Serve(x *Exchange) Verdict {
	v := s.b.View()
	in := region.Input{Tenant: x.Identity.Tenant, Local: s.local, Now: time.Now().UnixNano(), Roll: rand.Uint32()}
	if h := x.R.Header[s.hint]; len(h) > 0 {
		in.Hint = h[0]
	}
	var d region.Decision
	v.Decide(s.rule, &in, &d)
	s.counts[d.Reason].Inc()
	lr := &x.Log.Regional
	lr.Reason, lr.PolicyVersion, lr.StateVersion = d.Reason.String(), v.Policy().Version(), v.StateVersion()
	if !d.Reason.OK() {
		lr.Target = "503"
		return x.Fail(http.StatusServiceUnavailable, "no region available", FaultGateway)
	}
	lr.Target = v.Policy().Name(d.Target)
	x.Regions = s.filters[d.Target]
	return Continue
}

// oneRegion lets a pick choose the endpoints of one region only.
type oneRegion struct{ name string }

func (o oneRegion) Allows(r string) bool { return r == o.name }
