package region

// Reason says why a decision came out as it did. The set is small and
// fixed, so it can be a metric label.
type Reason uint8

// The reasons. The first four are decisions that found a region.
const (
	OKPrimary    Reason = iota // the tenant's primary region
	OKBackup                   // the backup (primary_backup), or a writer outside the primary
	OKWeighted                 // a weighted tenant's read, spread by weight
	HintNarrowed               // the client's hint narrowed the candidates to one region
	HintIgnored                // a hint named no candidate; decided as without it

	NoTenant               // no verified tenant, or one the policy does not list
	RegionNotAllowed       // the tenant may use no region the route has endpoints in
	NoHealthyRegion        // unhealthy, draining, or absent from the region state
	ConfigStale            // the region serves a snapshot too far behind this one
	ReplicaLag             // the replica lag is above the route's maximum
	LagUnknown             // no lag signal for the region
	SignalStale            // the lag signal is older than max_signal_age_ms
	StateUnknown           // no region-state document, or a stale one
	WriterUnknown          // the platform's writer region is not known
	CrossRegionWriteUnsafe // a write outside the primary without the platform's three guarantees

	numReasons
)

// NumReasons is the number of reasons (they are 0..NumReasons-1).
const NumReasons = int(numReasons)

var reasonNames = [numReasons]string{
	"ok_primary", "ok_backup", "ok_weighted", "hint_narrowed", "hint_ignored",
	"no_tenant", "region_not_allowed", "no_healthy_region", "config_stale", "replica_lag",
	"lag_unknown", "signal_stale", "state_unknown", "writer_unknown", "cross_region_write_unsafe",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// OK reports whether the decision found a region.
func (r Reason) OK() bool { return r <= HintIgnored }

// Reasons lists every reason, for pre-registering metric labels.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// ParseReason is the inverse of String.
func ParseReason(s string) (Reason, bool) {
	for i, n := range reasonNames {
		if n == s {
			return Reason(i), true
		}
	}
	return 0, false
}
