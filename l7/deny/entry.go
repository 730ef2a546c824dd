package deny

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind says what an entry's value is matched against.
type Kind string

// The kinds of entries.
const (
	KindAPIKeyID Kind = "api_key_id"
	KindJTI      Kind = "jti"
	KindSubject  Kind = "subject"
	KindTenant   Kind = "tenant"
	KindCIDR     Kind = "cidr"
)

var kinds = [...]Kind{KindAPIKeyID, KindJTI, KindSubject, KindTenant, KindCIDR}

// Kinds lists every kind.
func Kinds() []Kind { return slices.Clone(kinds[:]) }

func kindIndex(k Kind) int { return slices.Index(kinds[:], k) }

// Entry is one revocation. A CIDR value is a prefix or a bare address (a
// /32 or /128); Build masks it. ExpiresAt is kept to the second, rounded up.
type Entry struct {
	Kind      Kind
	Value     string
	ExpiresAt time.Time
	Reason    string
}

const timeLayout = "2006-01-02T15:04:05Z"

// norm is a validated entry in canonical form.
type norm struct {
	kind   Kind
	value  string
	exp    int64 // unix seconds
	reason string
	pfx    netip.Prefix // for KindCIDR
}

func compareNorm(a, b *norm) int {
	if c := strings.Compare(string(a.kind), string(b.kind)); c != 0 {
		return c
	}
	if a.kind != KindCIDR {
		return strings.Compare(a.value, b.value)
	}
	if c := a.pfx.Addr().Compare(b.pfx.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.pfx.Bits(), b.pfx.Bits())
}

// parseCIDR reads a prefix or bare address and returns it masked, with
// IPv4-mapped prefixes of length 96 or more turned into IPv4 ones.
func parseCIDR(v string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.IndexByte(v, '/') < 0 {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return p, err
		}
		if a.Zone() != "" {
			return p, fmt.Errorf("address %q has a zone", v)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	} else {
		var err error
		if p, err = netip.ParsePrefix(v); err != nil {
			return p, err
		}
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// checkText refuses empty, over-long, non-UTF-8 and control-character text.
func checkText(what, s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("%s is %d bytes, over the %d limit", what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%s %.64q has a control character", what, s)
	}
	return nil
}

// normalize validates one entry and brings it to canonical form.
func normalize(e Entry) (norm, error) {
	n := norm{kind: e.Kind, value: e.Value, reason: e.Reason}
	if kindIndex(e.Kind) < 0 {
		return n, fmt.Errorf("unknown kind %q (want one of %v)", e.Kind, kinds)
	}
	if e.Value == "" {
		return n, errors.New("empty value")
	}
	if err := checkText("value", e.Value, MaxValueBytes); err != nil {
		return n, err
	}
	if err := checkText("reason", e.Reason, MaxReasonBytes); err != nil {
		return n, err
	}
	if e.Kind == KindCIDR {
		p, err := parseCIDR(e.Value)
		if err != nil {
			return n, fmt.Errorf("cidr: %w", err)
		}
		n.pfx, n.value = p, p.String()
	}
	if e.ExpiresAt.IsZero() {
		return n, errors.New("no expiry")
	}
	n.exp = e.ExpiresAt.Unix()
	if e.ExpiresAt.Nanosecond() > 0 {
		n.exp++
	}
	if y := time.Unix(n.exp, 0).UTC().Year(); y < 1970 || y > 9999 {
		return n, fmt.Errorf("expiry year %d is outside 1970..9999", y)
	}
	return n, nil
}
