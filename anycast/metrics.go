package anycast

import "github.com/prometheus/client_golang/prometheus"

// metrics: in a dry run nothing is on the wire, so prefixes_announced
// stays 0, dry_run is 1, and the decision metrics (VIP state, transitions,
// guard) carry the prefix rampart_anycast_dry_run_ instead of
// rampart_anycast_, with dry_run_prefixes counting what would be sent.
type metrics struct {
	dryRun      prometheus.Gauge
	wouldSend   prometheus.Gauge // nil unless a dry run
	sessionsUp  prometheus.Gauge
	sessionUp   *prometheus.GaugeVec
	announced   prometheus.Gauge
	vipState    *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	guardActive *prometheus.GaugeVec
	guardTotal  *prometheus.CounterVec
	inputUp     *prometheus.GaugeVec
	bgpErrors   prometheus.Counter
	drained     *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, dry bool) (*metrics, error) {
	d := "rampart_anycast_" // decisions
	if dry {
		d = "rampart_anycast_dry_run_"
	}
	m := &metrics{
		dryRun: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_anycast_dry_run",
			Help: "1 while dry_run is on: decisions are made, no path is sent."}),
		sessionsUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_anycast_sessions_up",
			Help: "BGP sessions established."}),
		sessionUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rampart_anycast_session_up",
			Help: "1 while the BGP session with the peer is established."}, []string{"peer"}),
		announced: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_anycast_prefixes_announced",
			Help: "VIP prefixes with a path on the wire (announced, draining or held)."}),
		vipState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d + "vip_state",
			Help: "1 for the state each VIP is in."}, []string{"vip", "state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: d + "transitions_total",
			Help: "VIP state changes, by the state entered: announce, drain, hold, withdraw."}, []string{"vip", "to"}),
		guardActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d + "guard_active",
			Help: "1 while the guard keeps an unhealthy VIP announced because too few other sites announce it."}, []string{"vip"}),
		guardTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: d + "guard_activations_total",
			Help: "Times the guard refused a withdrawal."}, []string{"vip"}),
		inputUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rampart_anycast_input_up",
			Help: "1 while the health input is up (after rise/fall)."}, []string{"input"}),
		bgpErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "rampart_anycast_bgp_errors_total",
			Help: "Path adds or withdrawals GoBGP refused (retried at the next sample)."}),
		drained: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rampart_anycast_drained",
			Help: "1 while the VIP is drained deliberately, by source: operator (rampart anycast drain) or region (the region state says draining)."}, []string{"vip", "source"}),
	}
	if dry {
		m.dryRun.Set(1)
		m.wouldSend = prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_anycast_dry_run_prefixes",
			Help: "VIP prefixes a dry run would have on the wire (announced, draining or held)."})
	}
	if reg != nil {
		for _, c := range m.all() {
			if err := reg.Register(c); err != nil {
				m.unregister(reg)
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) all() []prometheus.Collector {
	all := []prometheus.Collector{m.dryRun, m.sessionsUp, m.sessionUp, m.announced, m.vipState,
		m.transitions, m.guardActive, m.guardTotal, m.inputUp, m.bgpErrors, m.drained}
	if m.wouldSend != nil {
		all = append(all, m.wouldSend)
	}
	return all
}

// unregister takes the collectors off reg, so that a new Announcer can
// register there after Stop.
func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.all() {
		reg.Unregister(c)
	}
}

// transitionLabel names a state change for rampart_anycast_transitions_total.
func transitionLabel(to VIPState) string {
	switch to {
	case StateAnnounced:
		return "announce"
	case StateDraining:
		return "drain"
	case StateHeld:
		return "hold"
	}
	return "withdraw"
}

// forget drops the series of a VIP removed from the config.
func (m *metrics) forget(vip string) {
	for _, s := range []VIPState{StateWithdrawn, StateAnnounced, StateDraining, StateHeld} {
		m.vipState.DeleteLabelValues(vip, string(s))
	}
	for _, to := range []string{"announce", "drain", "hold", "withdraw"} {
		m.transitions.DeleteLabelValues(vip, to)
	}
	m.guardActive.DeleteLabelValues(vip)
	m.guardTotal.DeleteLabelValues(vip)
}
