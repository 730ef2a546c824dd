package regionstate

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Bounds on a document; larger ones are refused.
const (
	MaxFileBytes = 16 << 20 // the whole signed file
	MaxRegions   = 1024
	MaxPlatforms = 16384
	MaxNameBytes = 64
	MaxSites     = 16384
	MaxAnnounced = 4096 // VIP prefixes per site
	MaxLeases    = 65536
)

// Errors a document is refused with; match them with errors.Is. Envelope
// errors (signature, key id, digest, format) come through as
// format/envelope's sentinels.
var (
	ErrMalformed = errors.New("malformed region-state body")
	ErrInvalid   = errors.New("region-state document invalid")
)

// earliest is the lowest Created or ObservedAt a document may carry: a
// zero or pre-2000 time is a producer's bug, not an observation.
var earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// latest keeps every time representable in int64 Unix nanoseconds.
var latest = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)

// maxProblems bounds how many problems one error lists.
const maxProblems = 20

// Validate checks s and lists every problem it finds (up to 20): a
// non-zero Version; a Created time in 2000..2262; region and platform names
// 1..64 bytes of [A-Za-z0-9._-], sorted and unique; replicas sorted by
// region and unique; every writer and replica region listed in Regions;
// every ObservedAt in 2000..2262 and not after Created; sites named like
// regions, sorted by name and unique, each with a region name, announcing
// prefixes in canonical masked netip.Prefix text (sorted as strings,
// unique, at most 4096) and a ReportedAt in 2000..2262 not after Created;
// quota leases sorted by (policy, region) and unique, policy named like a
// region, region listed in Regions, Expires in 2000..2262. The error
// matches ErrInvalid.
func (s *State) Validate() error {
	var p problems
	if s.Version.IsZero() {
		p.add("version 0.0 is not a document version (want epoch.sequence above 0.0)")
	}
	if !inRange(s.Created) {
		p.add("created %s is outside 2000-01-01..2262-01-01", stamp(s.Created))
	}
	if len(s.Regions) > MaxRegions {
		p.add("%d regions is over the %d limit", len(s.Regions), MaxRegions)
	}
	if len(s.Platforms) > MaxPlatforms {
		p.add("%d platforms is over the %d limit", len(s.Platforms), MaxPlatforms)
	}
	for i, r := range s.Regions {
		if err := checkName(r.Name); err != nil {
			p.add("regions[%d]: name %q: %v", i, r.Name, err)
		}
		if i > 0 && s.Regions[i-1].Name >= r.Name {
			p.add("regions[%d]: %q is not after %q: regions must be sorted by name, without duplicates", i, r.Name, s.Regions[i-1].Name)
		}
	}
	for i, pl := range s.Platforms {
		where := fmt.Sprintf("platforms[%d] (%q)", i, pl.Name)
		if err := checkName(pl.Name); err != nil {
			p.add("%s: name: %v", where, err)
		}
		if i > 0 && s.Platforms[i-1].Name >= pl.Name {
			p.add("%s: not after %q: platforms must be sorted by name, without duplicates", where, s.Platforms[i-1].Name)
		}
		if pl.Writer != "" && !s.hasRegion(pl.Writer) {
			p.add("%s: writer %q is not a listed region", where, pl.Writer)
		}
		if pl.Writer == "" && pl.WriterEpoch != 0 {
			p.add("%s: writer_epoch %d without a writer", where, pl.WriterEpoch)
		}
		if len(pl.Replicas) > MaxRegions {
			p.add("%s: %d replicas is over the %d limit", where, len(pl.Replicas), MaxRegions)
		}
		for j, r := range pl.Replicas {
			if !s.hasRegion(r.Region) {
				p.add("%s: replicas[%d]: region %q is not a listed region", where, j, r.Region)
			}
			if j > 0 && pl.Replicas[j-1].Region >= r.Region {
				p.add("%s: replicas[%d]: %q is not after %q: replicas must be sorted by region, without duplicates", where, j, r.Region, pl.Replicas[j-1].Region)
			}
			if !inRange(r.ObservedAt) {
				p.add("%s: replicas[%d] (%q): observed_at %s is outside 2000-01-01..2262-01-01", where, j, r.Region, stamp(r.ObservedAt))
			} else if r.ObservedAt.After(s.Created) {
				p.add("%s: replicas[%d] (%q): observed_at %s is after the document's created time %s", where, j, r.Region, stamp(r.ObservedAt), stamp(s.Created))
			}
		}
	}
	s.validateSites(&p)
	s.validateLeases(&p)
	return p.err()
}

func (s *State) validateSites(p *problems) {
	if len(s.Sites) > MaxSites {
		p.add("%d sites is over the %d limit", len(s.Sites), MaxSites)
	}
	for i, st := range s.Sites {
		where := fmt.Sprintf("sites[%d] (%q)", i, st.Name)
		if err := checkName(st.Name); err != nil {
			p.add("%s: name: %v", where, err)
		}
		if i > 0 && s.Sites[i-1].Name >= st.Name {
			p.add("%s: not after %q: sites must be sorted by name, without duplicates", where, s.Sites[i-1].Name)
		}
		if err := checkName(st.Region); err != nil {
			p.add("%s: region %q: %v", where, st.Region, err)
		}
		if len(st.Announcing) > MaxAnnounced {
			p.add("%s: %d announced prefixes is over the %d limit", where, len(st.Announcing), MaxAnnounced)
		}
		for j, a := range st.Announcing {
			pfx, err := netip.ParsePrefix(a)
			switch {
			case err != nil:
				p.add("%s: announcing[%d]: %v", where, j, err)
			case pfx.Masked() != pfx || pfx.String() != a:
				p.add("%s: announcing[%d]: %q is not canonical masked prefix text (want %q)", where, j, a, pfx.Masked().String())
			}
			if j > 0 && st.Announcing[j-1] >= a {
				p.add("%s: announcing[%d]: %q is not after %q: prefixes must be sorted, without duplicates", where, j, a, st.Announcing[j-1])
			}
		}
		if !inRange(st.ReportedAt) {
			p.add("%s: reported_at %s is outside 2000-01-01..2262-01-01", where, stamp(st.ReportedAt))
		} else if st.ReportedAt.After(s.Created) {
			p.add("%s: reported_at %s is after the document's created time %s", where, stamp(st.ReportedAt), stamp(s.Created))
		}
	}
}

func (s *State) validateLeases(p *problems) {
	if len(s.QuotaLeases) > MaxLeases {
		p.add("%d quota leases is over the %d limit", len(s.QuotaLeases), MaxLeases)
	}
	for i, l := range s.QuotaLeases {
		where := fmt.Sprintf("quota_leases[%d] (%q, %q)", i, l.Policy, l.Region)
		if err := checkName(l.Policy); err != nil {
			p.add("%s: policy: %v", where, err)
		}
		if !s.hasRegion(l.Region) {
			p.add("%s: region is not a listed region", where)
		}
		if i > 0 && compareLease(s.QuotaLeases[i-1], l) >= 0 {
			p.add("%s: not after (%q, %q): leases must be sorted by policy then region, without duplicates", where, s.QuotaLeases[i-1].Policy, s.QuotaLeases[i-1].Region)
		}
		if !inRange(l.Expires) {
			p.add("%s: expires %s is outside 2000-01-01..2262-01-01", where, stamp(l.Expires))
		}
	}
}

// hasRegion reports whether name is listed, by binary search when the
// regions are sorted and by a scan otherwise (Validate reports the order).
func (s *State) hasRegion(name string) bool {
	if _, ok := s.Region(name); ok {
		return true
	}
	for _, r := range s.Regions {
		if r.Name == name {
			return true
		}
	}
	return false
}

func checkName(n string) error {
	if n == "" {
		return errors.New("empty")
	}
	if len(n) > MaxNameBytes {
		return fmt.Errorf("%d bytes is over the %d limit", len(n), MaxNameBytes)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("byte %d (%q) is not one of [A-Za-z0-9._-]", i, c)
		}
	}
	return nil
}

func inRange(t time.Time) bool { return !t.Before(earliest) && t.Before(latest) }

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(zero)"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

type problems struct {
	list []string
	n    int
}

func (p *problems) add(format string, args ...any) {
	p.n++
	if len(p.list) < maxProblems {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) err() error {
	if p.n == 0 {
		return nil
	}
	more := ""
	if p.n > len(p.list) {
		more = fmt.Sprintf("; and %d more", p.n-len(p.list))
	}
	return fmt.Errorf("%w: %d problem(s): %s%s", ErrInvalid, p.n, strings.Join(p.list, "; "), more)
}
