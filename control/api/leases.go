package api

import (
	"net/http"
	"time"
)

// leaseView is one global quota lease as GET /v1/quota/leases shows it.
type leaseView struct {
	Policy    string    `json:"policy"`
	Region    string    `json:"region"`
	PerSecond uint64    `json:"per_second"`
	Burst     uint64    `json:"burst"`
	Nodes     uint64    `json:"nodes"`
	Expires   time.Time `json:"expires"`
}

// quotaLeases answers GET /v1/quota/leases: the global quota leases this
// instance granted (the leader's; a follower grants none), sorted by
// policy and region.
func (a *API) quotaLeases(w http.ResponseWriter, _ *http.Request) {
	out := []leaseView{}
	for _, l := range a.p.QuotaLeases() {
		out = append(out, leaseView{Policy: l.Policy, Region: l.Region, PerSecond: l.PerSecond, Burst: l.Burst, Nodes: l.Nodes, Expires: l.Expires})
	}
	writeJSON(w, http.StatusOK, struct {
		Leases []leaseView `json:"leases"`
	}{out})
}
