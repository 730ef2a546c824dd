// Package region is the regional routing decision: which regions may serve
// one request of a route with a platform, for the verified tenant, under the
// current region state.
//
// A Policy is compiled from a snapshot's config: tenant id to a compact
// record, region names to small integers, region sets as 64-bit masks. A
// Tracker turns a Policy and a region-state document (or none) into a View;
// it remembers, by region name and across views, when a region came back to
// service, so that region's share of traffic grows back in the policy's
// recovery steps. View.Decide allocates nothing.
//
// The rules (README, "Regional routing"):
//   - candidates are the regions the tenant may use that hold endpoints of
//     the route's clusters; a region must be healthy, not draining, and
//     serve a snapshot no more than max_config_lag sequences of the same
//     epoch behind this one;
//   - a read needs the region's replica lag at most the route's
//     max_replica_lag_ms, observed less than max_signal_age_ms ago; an
//     unknown lag disqualifies;
//   - a write goes to the platform's writer region only, and to a region
//     other than the tenant's primary only when the platform has all three
//     guarantees; never to two regions;
//   - fixed uses the primary only, primary_backup the primary else the
//     backup, weighted (reads) spreads by weight over what is left;
//   - a client's hint may narrow the candidates to one of them, never widen;
//   - no region-state document, or one older than region_state_max_age_ms,
//     means every signal is unknown: nothing qualifies (fail closed).
package region
