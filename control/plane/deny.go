package plane

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/deny"
)

// Deny returns the deny channel's state (entries still in force).
func (p *Plane) Deny(ctx context.Context) (*model.DenyState, error) {
	var d *model.DenyState
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		d, err = tx.Deny(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.Entries = live(d.Entries, time.Now())
	return d, nil
}

// AddDeny adds entries, given as the YAML or JSON list `rampart deny
// build` reads (kind, value, ttl or expires_at, reason), and publishes a
// new signed list with the next sequence. An entry already listed (same
// kind and canonical value) takes the new expiry and reason.
func (p *Plane) AddDeny(ctx context.Context, body []byte) (*model.DenyState, error) {
	now := time.Now()
	entries, err := deny.ParseYAML(body, now)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if len(entries) == 0 {
		return nil, badRequest("no entries")
	}
	add := make([]model.DenyEntry, 0, len(entries))
	for _, e := range entries {
		v := e.Value
		if e.Kind == deny.KindCIDR {
			if v, err = canonicalCIDR(v); err != nil {
				return nil, badRequest("cidr %q: %v", e.Value, err)
			}
		}
		add = append(add, model.DenyEntry{Kind: string(e.Kind), Value: v, ExpiresAt: e.ExpiresAt.UTC(), Reason: e.Reason, AddedAt: now.UTC()})
	}
	return p.changeDeny(ctx, func(cur []model.DenyEntry) ([]model.DenyEntry, error) {
		idx := map[[2]string]int{}
		for i, e := range cur {
			idx[[2]string{e.Kind, e.Value}] = i
		}
		for _, e := range add {
			if i, ok := idx[[2]string{e.Kind, e.Value}]; ok {
				cur[i] = e
				continue
			}
			idx[[2]string{e.Kind, e.Value}] = len(cur)
			cur = append(cur, e)
		}
		return cur, nil
	})
}

// ExpireDeny removes an entry at once and publishes the new list.
func (p *Plane) ExpireDeny(ctx context.Context, kind, value string) (*model.DenyState, error) {
	if kind == string(deny.KindCIDR) {
		if v, err := canonicalCIDR(value); err == nil {
			value = v
		}
	}
	return p.changeDeny(ctx, func(cur []model.DenyEntry) ([]model.DenyEntry, error) {
		for i, e := range cur {
			if e.Kind == kind && e.Value == value {
				return append(cur[:i], cur[i+1:]...), nil
			}
		}
		return nil, fmt.Errorf("deny entry %s %q: %w", kind, value, store.ErrNotFound)
	})
}

// changeDeny applies fn to the entries in force, then signs and stores the
// list with the next sequence and emits the event that wakes the nodes'
// long-polls.
func (p *Plane) changeDeny(ctx context.Context, fn func([]model.DenyEntry) ([]model.DenyEntry, error)) (*model.DenyState, error) {
	var out *model.DenyState
	err := p.update(ctx, func(tx store.Tx) error {
		d, err := tx.Deny(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		entries, err := fn(live(d.Entries, now))
		if err != nil {
			return err
		}
		sort.Slice(entries, func(i, j int) bool {
			a, b := entries[i], entries[j]
			return a.Kind < b.Kind || a.Kind == b.Kind && a.Value < b.Value
		})
		list := make([]deny.Entry, len(entries))
		for i, e := range entries {
			list[i] = deny.Entry{Kind: deny.Kind(e.Kind), Value: e.Value, ExpiresAt: e.ExpiresAt, Reason: e.Reason}
		}
		file, err := deny.Build(list, d.Sequence+1, p.o.Key, now)
		if err != nil {
			return badRequest("%s", strings.TrimPrefix(err.Error(), deny.ErrInvalid.Error()+": "))
		}
		out = &model.DenyState{Sequence: d.Sequence + 1, Entries: entries, UpdatedAt: now.UTC(), File: file}
		if err := tx.PutDeny(ctx, out); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventDeny, fmt.Sprint(out.Sequence))
	})
	if err != nil {
		return nil, err
	}
	p.log.Info("deny list published", "sequence", out.Sequence, "entries", len(out.Entries))
	return out, nil
}

// live drops entries that expired.
func live(es []model.DenyEntry, now time.Time) []model.DenyEntry {
	out := make([]model.DenyEntry, 0, len(es))
	for _, e := range es {
		if e.ExpiresAt.After(now) {
			out = append(out, e)
		}
	}
	return out
}

// canonicalCIDR writes a prefix or bare address as the deny list does:
// masked, IPv4-mapped prefixes as IPv4.
func canonicalCIDR(v string) (string, error) {
	var pfx netip.Prefix
	if !strings.Contains(v, "/") {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return "", err
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	} else {
		var err error
		if pfx, err = netip.ParsePrefix(v); err != nil {
			return "", err
		}
	}
	if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
		pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
	}
	return pfx.Masked().String(), nil
}
