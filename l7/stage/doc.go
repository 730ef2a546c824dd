// Package stage is the proxy's request path as a chain of stages behind
// one small interface (Stage: Name, and Serve, which returns Continue or
// Replied), in the manner of Envoy's HTTP filters and Caddy's handlers.
//
// Chains are compiled at snapshot build time, never per request: Screen
// builds the runtime's chain that runs before routing, and Compile builds
// each route's chain from the builders registered for its slots. A
// builder returns nil for a route that does not use its stage, so the
// chain holds only the stages the route uses and a request pays nothing
// for the others; a builder error names the route and the stage, and
// rejects the snapshot.
//
// The order is fixed:
//
//  1. deny_screen (Screen, before routing): strip the identity headers a
//     client sent; refuse a client address on the deny list (403).
//  2. route match (package proxy): the shared request checks, the route
//     table, and the traffic split's roll of a revision (Exchange.Cluster).
//  3. body_route (SlotBodyRoute): a route with body_route reads the JSON
//     body, picks the route its field names and hands the request to that
//     route's chain (Env.Handoff), which answers it; 400/408/413/415.
//  4. auth (SlotAuth): the route's auth policy (401 or the policy's status).
//  5. deny_identity (SlotDenyIdentity): the verified identity on the deny
//     list (403).
//  6. scopes (SlotScopes): required_scopes (403, insufficient_scope).
//  7. quota (SlotQuota): the route's quota policy (429, RateLimit-*).
//  8. headers (SlotHeaders): the request header rules.
//  9. identity_headers (SlotIdentityHeaders): the verified identity's
//     headers, after the rules.
//  10. regional (SlotRegional): the regional routing policy; it narrows
//     Exchange.Regions, the endpoints forward may pick.
//  11. cache (SlotCache): a route with cache answers GET/HEAD from the
//     proxy's store (l7/cache), or runs forward itself through a recorder
//     that keeps a storable answer; Chain.Then hands it forward at build
//     time, so routes without cache pay nothing.
//  12. forward (package proxy, appended to every route's chain): admission,
//     the request body, an endpoint pick per attempt (cluster.Pick with
//     Exchange.Regions), retries, the response and its header rules.
//
// Adding a stage is one file: its type with Name and Serve, a Builder, and
// an init that registers the builder for its Slot (a new place in the
// order adds a Slot constant). A stage refuses with Exchange.Refuse (the
// client's fault, a security event) or Exchange.Fail (any status and
// fault); its process-wide series go through Metrics.Register, which
// returns the collector registered first, so every snapshot build can ask.
package stage
