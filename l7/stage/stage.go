package stage

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/headerrule"
	"github.com/rampart-edge/rampart/l7/quota"
	"github.com/rampart-edge/rampart/l7/region"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Stage is one step of the request path. Serve either lets the request go
// on (Continue) or has answered it (Replied: the response, or its error,
// went to the client, and the stages after it do not run).
type Stage interface {
	Name() string
	Serve(x *Exchange) Verdict
}

// Verdict is what a stage decided.
type Verdict uint8

const (
	Continue Verdict = iota // the next stage runs
	Replied                 // the request is answered; the chain stops
)

// Chain is stages in order; it holds only the stages a route uses.
type Chain []Stage

// Run serves x through the chain and reports whether every stage let it
// through (false: one replied; the chain ending in forward always replies).
func (c Chain) Run(x *Exchange) bool {
	for _, s := range c {
		if s.Serve(x) == Replied {
			return false
		}
	}
	return true
}

// Then is c followed by last (the proxy's forward stage); a stage that
// runs the next one itself (the cache) is handed last here, at build time.
func (c Chain) Then(last Stage) Chain {
	for _, s := range c {
		if w, ok := s.(interface{ setNext(Stage) }); ok {
			w.setNext(last)
		}
	}
	return append(c, last)
}

// Names lists the chain's stage names in order (for tests and errors).
func (c Chain) Names() []string {
	out := make([]string, len(c))
	for i, s := range c {
		out[i] = s.Name()
	}
	return out
}

// Whose fault a failed request is, for rampart_request_errors_total: a
// gateway fault (load shed, internal) is the proxy's; an upstream fault
// (5xx, unreachable, no healthy endpoint, breaker) is the service's; a
// client fault is the client's (4xx, 499, a refusal by policy).
const (
	FaultGateway  = "gateway"
	FaultUpstream = "upstream"
	FaultClient   = "client"
)

// Exchange is one request on its way through the stages: what the proxy
// knows of it before the first stage, what route matching found, and what
// stages found out and left for the later ones.
type Exchange struct {
	W   http.ResponseWriter
	R   *http.Request
	Log *accesslog.Entry // the request's access log line (Log.ReqID is its request id)
	// Listener is the settings of the listener the request came in on
	// (nil when the runtime does not know it).
	Listener *snapshot.Listener

	// Set by route matching, before the route's chain runs.
	Route   *snapshot.Route
	Match   *route.Match
	Path    string           // normalised path: routed on and forwarded
	Query   string           // raw query, forwarded as sent
	Host    string           // normalised host: routed on
	Cluster *cluster.Cluster // the revision the traffic split rolled

	// Set by stages.
	Identity auth.Identity  // the verified identity (auth); zero without auth
	Regions  cluster.Filter // the endpoints forward may pick (regional); nil: any
	Fault    string         // whose fault a failure is (FaultClient, ...); "" until one is known
	Abort    bool           // the response was cut short after its head went out
}

// Fail answers the request with an error (status, a plain-text body naming
// msg and the request id, X-Request-Id, Cache-Control: no-store) and
// records status and fault. Response header fields already set (such as
// WWW-Authenticate, RateLimit-*, Retry-After) are kept.
func (x *Exchange) Fail(status int, msg, fault string) Verdict {
	x.Fault = fault
	x.Log.Status = status
	WriteError(x.W, status, msg, x.Log.ReqID)
	return Replied
}

// Refuse answers a request a policy stage stopped: a security event and
// the client's fault.
func (x *Exchange) Refuse(status int, msg string) Verdict {
	x.Log.Security = true
	return x.Fail(status, msg, FaultClient)
}

// WriteError writes the proxy's error answer: status, a plain-text body
// "<code> <text>: <msg> (request id <id>)", X-Request-Id and no caching.
func WriteError(w http.ResponseWriter, code int, msg, reqID string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Request-Id", reqID)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(strconv.Itoa(code) + " " + http.StatusText(code) + ": " + msg + " (request id " + reqID + ")\n"))
}

// Slot is a stage's place in a route's chain. The order is fixed: a route
// chain runs its stages in slot order, then the proxy's forward stage.
// (The deny screen of the client address runs before routing, in the
// runtime's Screen chain.)
type Slot int

const (
	SlotBodyRoute       Slot = iota // body_route: hand the request to the route its JSON body names
	SlotAuth                        // authenticate (auth policy)
	SlotDenyIdentity                // the deny list's identities (key id, jti, subject, tenant)
	SlotScopes                      // required_scopes
	SlotQuota                       // the route's quota policy
	SlotHeaders                     // request header rules
	SlotIdentityHeaders             // the verified identity's headers (set after the rules)
	SlotRegional                    // the regional routing policy: narrows Regions
	SlotCache                       // the response cache: answers from the store or runs forward itself
	numSlots
)

var slotNames = [numSlots]string{"body_route", "auth", "deny_identity", "scopes", "quota", "headers", "identity_headers", "regional", "cache"}

func (s Slot) String() string {
	if s >= 0 && s < numSlots {
		return slotNames[s]
	}
	return "slot" + strconv.Itoa(int(s))
}

// Route is what a builder compiles a stage for.
type Route struct {
	Config *snapshot.Route
	Index  int32             // in the snapshot's routes and the route table
	Rules  *headerrule.Rules // the route's compiled header rules (nil: none); forward applies the response half
}

// Builder compiles a route's stage for one slot at snapshot build time;
// it returns nil when the route does not use the stage (then the chain
// has no such stage and the request pays nothing for it), and an error
// when the route's settings cannot be built.
type Builder func(r *Route, env *Env) (Stage, error)

var builders [numSlots]Builder

// register installs the builder of a slot; each stage's file calls it
// from init, so adding a stage is one file (and, for a new place in the
// order, one Slot constant).
func register(s Slot, b Builder) {
	if builders[s] != nil {
		panic("stage: slot " + s.String() + " registered twice")
	}
	builders[s] = b
}

// Env is what stages are compiled from besides the route: the snapshot and
// what the runtime built from it once, and what outlives runtimes.
type Env struct {
	Snap     *snapshot.Snapshot
	Region   string // where this proxy runs ("" when not set)
	Log      *slog.Logger
	Metrics  *Metrics
	Deny     *atomic.Pointer[deny.List] // the deny list in force (swapped at any time)
	Auth     *auth.Set
	Quota    *quota.Limiter
	Table    *route.Table
	Identity IdentityKeys
	// Regional is the snapshot's regional policy bound to the process's
	// region state (l7/region); nil when the snapshot has none.
	Regional *region.Binding
	// Handoff serves x through another route's chain (index in the
	// snapshot's routes): body routing's way on. Set by the runtime.
	Handoff func(x *Exchange, route int32)

	quotaKeys map[string][]string // quota policy id -> key parts, made on first use
}

// Compile builds a route's chain from its slots, in slot order; an error
// names the route and the stage.
func Compile(r *Route, env *Env) (Chain, error) {
	var c Chain
	for s, b := range builders {
		if b == nil {
			continue
		}
		st, err := b(r, env)
		if err != nil {
			return nil, fmt.Errorf("route %q: stage %s: %w", r.Config.ID, Slot(s), err)
		}
		if st != nil {
			c = append(c, st)
		}
	}
	return c, nil
}

// errNotBuilt is a stage's reference to something the runtime did not build.
var errNotBuilt = errors.New("was not built")
