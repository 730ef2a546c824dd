// Package regionstate is the region-state document: the runtime signals a
// proxy uses to route between regions. Per region it says whether the
// region is healthy, which snapshot version it serves and whether an
// operator drains it; per platform (a set of clusters sharing one
// database) it names the current writer region with its fencing epoch and,
// per replica region, the replica lag and when it was observed. Per anycast
// site (an agent) it lists the VIP prefixes the site announces as its node
// last reported them, and per global quota policy and region the lease of
// the global rate the region may admit until the lease expires (with the
// count of ready nodes it was granted for). The sites
// and quota_leases keys are left out of the body when empty, so a document
// without them has the bytes it had before they existed.
//
// The document is signed and versioned with the shared envelope
// (format/envelope): the same Ed25519 key and (epoch, sequence) rules as
// the snapshot and the deny list. Its body is canonical JSON with a fixed
// field order and every list sorted, so equal states give equal bytes.
// Parse is strict (unknown fields, wrong types, duplicate keys and trailing
// bytes are refused); Build sorts and validates, so a producer (the control
// plane) only fills a State and calls it.
//
// This is a format package: no goroutines, watchers or metrics. The proxy's
// runtime watcher lives in l7/regionwatch.
package regionstate
