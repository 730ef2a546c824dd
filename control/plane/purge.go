package plane

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Bounds of the purge document the control plane keeps. A rule leaves the
// document once it is older than PurgeKeepFor or when more than
// PurgeMaxRules newer ones follow it; the newest rule always stays, so a
// node that was away longer than that sees, by the gap in rule ids, that
// it missed some (l7/purgewatch then drops everything stored before the
// oldest rule listed).
const (
	PurgeKeepFor  = 24 * time.Hour
	PurgeMaxRules = 1000
)

// PurgeRequest is one purge: at least one selector; an object must match
// every one set.
type PurgeRequest struct {
	Route        string `json:"route"`
	Prefix       string `json:"prefix"`
	SurrogateKey string `json:"surrogate_key"`
}

// PurgeResult is a published purge: its rule and the document's sequence.
type PurgeResult struct {
	Sequence uint64          `json:"sequence"`
	Rule     model.PurgeRule `json:"rule"`
	Rules    int             `json:"rules"` // rules listed in the document now
}

// Validate checks a request: a selector at least, each bounded, printable
// UTF-8; a surrogate key is one word (Surrogate-Key lists words).
func (r PurgeRequest) Validate() error {
	if r.Route == "" && r.Prefix == "" && r.SurrogateKey == "" {
		return badRequest("no selector: give route, prefix or surrogate_key")
	}
	for _, f := range []struct{ name, v string }{{"route", r.Route}, {"prefix", r.Prefix}, {"surrogate_key", r.SurrogateKey}} {
		if err := checkText(f.name, f.v, purge.MaxSelectorBytes); err != nil {
			return err
		}
		if !utf8.ValidString(f.v) {
			return badRequest("%s is not valid UTF-8", f.name)
		}
		if f.v != strings.TrimSpace(f.v) {
			return badRequest("%s %.64q has leading or trailing white space", f.name, f.v)
		}
	}
	if strings.ContainsAny(r.SurrogateKey, " \t") {
		return badRequest("surrogate_key %.64q has white space: a surrogate key is one word of the Surrogate-Key header", r.SurrogateKey)
	}
	if r.Route != "" && strings.ContainsAny(r.Route, " \t") {
		return badRequest("route %.64q has white space: it is a route id", r.Route)
	}
	return nil
}

// Purge returns the purge channel's state (the rules listed).
func (p *Plane) Purge(ctx context.Context) (*model.PurgeState, error) {
	var s *model.PurgeState
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		s, err = tx.Purge(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.Rules == nil {
		s.Rules = []model.PurgeRule{}
	}
	return s, nil
}

// AddPurge appends a rule (the next id, now) to the purge document, drops
// the rules past the bounds, signs it with the next sequence and stores
// it; the event wakes the nodes' long-polls.
func (p *Plane) AddPurge(ctx context.Context, req PurgeRequest, by string) (*PurgeResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var out *PurgeResult
	err := p.update(ctx, func(tx store.Tx) error {
		cur, err := tx.Purge(ctx)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		var next uint64 = 1
		if n := len(cur.Rules); n > 0 {
			next = cur.Rules[n-1].ID + 1
		}
		if next <= cur.Sequence { // ids never reused, even once every rule left
			next = cur.Sequence + 1
		}
		rule := model.PurgeRule{ID: next, At: now, Route: req.Route, Prefix: req.Prefix, SurrogateKey: req.SurrogateKey, By: by}
		rules := PrunePurgeRules(append(cur.Rules, rule), now, PurgeKeepFor, PurgeMaxRules)
		doc := &purge.Document{Version: envelope.Version{Epoch: 1, Sequence: cur.Sequence + 1}, Created: now}
		for _, r := range rules {
			doc.Rules = append(doc.Rules, purge.Rule{ID: r.ID, AtUnixNano: r.At.UnixNano(), Route: r.Route, Prefix: r.Prefix, SurrogateKey: r.SurrogateKey})
		}
		file, err := purge.Build(p.o.Key, doc)
		if err != nil {
			return badRequest("%s", strings.TrimPrefix(err.Error(), purge.ErrInvalid.Error()+": "))
		}
		st := &model.PurgeState{Sequence: doc.Version.Sequence, Rules: rules, UpdatedAt: now, File: file}
		if err := tx.PutPurge(ctx, st); err != nil {
			return err
		}
		out = &PurgeResult{Sequence: st.Sequence, Rule: rule, Rules: len(rules)}
		return tx.Emit(ctx, model.EventPurge, fmt.Sprint(st.Sequence))
	})
	if err != nil {
		return nil, err
	}
	p.log.Info("purge published", "sequence", out.Sequence, "rule", out.Rule.ID, "route", req.Route,
		"prefix", req.Prefix, "surrogate_key", req.SurrogateKey, "by", by, "rules", out.Rules)
	return out, nil
}

// PrunePurgeRules keeps the rules (in id order) not older than keepFor
// at now, at most maxRules of the newest, and always the newest one.
func PrunePurgeRules(rules []model.PurgeRule, now time.Time, keepFor time.Duration, maxRules int) []model.PurgeRule {
	if len(rules) == 0 {
		return []model.PurgeRule{}
	}
	first := max(len(rules)-max(maxRules, 1), 0)
	for first < len(rules)-1 && now.Sub(rules[first].At) > keepFor {
		first++
	}
	return append([]model.PurgeRule{}, rules[first:]...)
}

// WatchPurge answers a node's long-poll of the purge channel: the signed
// document when its version is above the node's, at once or as soon as
// one is; nil when the wait ends without one.
func (p *Plane) WatchPurge(ctx context.Context, q model.WatchQuery) (envelope.Version, []byte, error) {
	timer := time.NewTimer(p.timeout(q))
	defer timer.Stop()
	for {
		wake := p.hub.wait()
		if s := p.view.Load().purge; s != nil && len(s.File) > 0 {
			v := envelope.Version{Epoch: 1, Sequence: s.Sequence}
			if q.Version.Less(snapshot.Version(v)) {
				return v, s.File, nil
			}
		}
		select {
		case <-wake:
		case <-timer.C:
			return envelope.Version{}, nil, nil
		case <-ctx.Done():
			return envelope.Version{}, nil, ctx.Err()
		}
	}
}
