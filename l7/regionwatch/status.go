package regionwatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Status is what /status shows of the region state.
type Status struct {
	File          string    `json:"file"`
	MaxAgeSeconds float64   `json:"max_age_seconds"`
	Version       string    `json:"version,omitempty"` // epoch.sequence of the document in force
	Created       time.Time `json:"created,omitzero"`
	AgeSeconds    float64   `json:"age_seconds,omitempty"`
	AppliedAt     time.Time `json:"applied_at,omitzero"`
	// Fresh: a document is in force and its age is within the max age.
	// When false every signal is unknown to the consumer.
	Fresh       bool     `json:"fresh"`
	Regions     int      `json:"regions"`
	Platforms   int      `json:"platforms"`
	LastRefusal *Refusal `json:"last_refusal,omitempty"`
}

// Status reports the document in force and the last refusal.
func (w *Watcher) Status() Status {
	st := Status{File: w.c.Path, MaxAgeSeconds: w.c.MaxAge.Seconds()}
	s, fresh := w.Current()
	st.Fresh = fresh
	if s != nil {
		st.Version, st.Created = s.Version.String(), s.Created
		st.AgeSeconds = w.now().Sub(s.Created).Seconds()
		st.Regions, st.Platforms = len(s.Regions), len(s.Platforms)
		if at := w.applied.Load(); at != nil {
			st.AppliedAt = *at
		}
	}
	if r := w.dw.LastRefusal(); r != nil {
		st.LastRefusal = &Refusal{Reason: r.Reason, Error: r.Error, File: r.File, At: r.At}
		if !r.Version.IsZero() {
			st.LastRefusal.Version = r.Version.String()
		}
	}
	return st
}

type metrics struct {
	rejected *prometheus.CounterVec
	version  *prometheus.GaugeVec
	age      prometheus.GaugeFunc
	stale    prometheus.GaugeFunc
}

func newMetrics(w *Watcher) *metrics {
	m := &metrics{
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_region_state_rejected_total", Help: "Region-state files refused, by reason.",
		}, []string{"reason"}),
		version: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rampart_region_state_version", Help: "Version of the region-state document in force, by part (epoch, sequence); 0 before any.",
		}, []string{"part"}),
		age: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rampart_region_state_age_seconds", Help: "Seconds since the region-state document in force was created; -1 before any.",
		}, func() float64 {
			if s, _ := w.Current(); s != nil {
				return w.now().Sub(s.Created).Seconds()
			}
			return -1
		}),
		stale: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rampart_region_state_stale", Help: "1 while the region-state document is absent or older than the max age (every signal unknown), else 0.",
		}, func() float64 {
			if _, fresh := w.Current(); fresh {
				return 0
			}
			return 1
		}),
	}
	for _, r := range Reasons {
		m.rejected.WithLabelValues(r)
	}
	m.version.WithLabelValues("epoch")
	m.version.WithLabelValues("sequence")
	return m
}

// Register adds the watcher's metrics to reg.
func (w *Watcher) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{w.m.rejected, w.m.version, w.m.age, w.m.stale} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
