// Package deny is the fast deny channel: a small signed list of revoked API
// key ids, JWT ids (jti), subjects, tenants and client CIDRs, with its own
// sequence, separate from snapshots. The proxy applies a new list within a
// second of it appearing, without rebuilding its snapshot.
//
// # Format
//
// A deny file is a signed envelope (format/envelope), one line of JSON:
//
//	{"format":"rampart.deny.v2","epoch":0,"sequence":N,"created_at_unix_nano":T,
//	 "key_id":"<envelope.KeyID of the signer>","blocks":[[LEN,"<hex sha256>"],...],
//	 "signature":"<base64 Ed25519>","body":{"entries":[ENTRY,...]}}
//
// where each ENTRY is
//
//	{"kind":"api_key_id|cidr|jti|subject|tenant","value":"...",
//	 "expires_at":"2006-01-02T15:04:05Z","reason":"..."}
//
// with "reason" left out when empty. The signature covers the format, the
// version (epoch is always 0 for a deny list), the creation time, the key
// id and the digest of the block table, and each block's hash is checked,
// so no byte of a file can change without Parse refusing it. The blocks
// tile the body at content-defined cuts right after the comma following a
// record (cut.go: a record whose CRC-32C has its low 10 bits zero ends a
// block of at least 8 KiB; none grows past 512 KiB by more than a record),
// so adding or removing an entry changes one block. rampart.deny.v1 files
// (the format before the envelope) are refused with an error naming it.
//
// The encoding is canonical and Parse accepts nothing else: the envelope
// as Seal writes it, the body's fields in this order, no whitespace, only
// \" and \\ escapes, entries sorted by kind name then value (CIDRs by
// family, address, then length) without duplicates, CIDRs masked in
// netip's text form (IPv4-mapped prefixes written as IPv4), expiries in
// UTC to the second, and the cuts the rule gives. One list has exactly one
// encoding, and a million entries parse in under a second, several times
// faster than encoding/json would.
//
// Sequences only grow: a list is replaced by one with a higher sequence,
// never by an equal or lower one, so revoking less means issuing a new list.
//
// # Guarantees
//
//   - Parse checks, cheapest first: size, framing, key id, signature, each
//     block's hash, then every entry and the cuts. Errors match ErrMalformed,
//     ErrDigest, ErrSignature or ErrInvalid with errors.Is (and the
//     envelope's own sentinels, which they wrap).
//   - A List is immutable. Check and CheckIP are safe for concurrent use,
//     take no lock and allocate nothing. An entry matches while
//     now < expires_at; expired entries never match.
//   - Addresses are unmapped before lookup, so ::ffff:a.b.c.d matches IPv4
//     prefixes; other IPv6 prefixes match only IPv6 addresses.
//   - A Watcher never goes back to an equal or lower sequence, keeps its list
//     when a file is bad, and persists the last list it applied.
//   - ParseNext (what a Watcher uses) verifies like Parse but hashes only
//     the blocks that are not byte-equal to a block of the current list's,
//     skips the blocks both have in the same place, decodes only the records
//     that differ and derives the index from the current list's; it returns
//     what Parse returns, errors included, falling back to a full decode when
//     more than 4096 + n/64 records differ. A List keeps its file for this
//     (its size in memory).
//   - ParseNextStream is ParseNext that, when it decodes the whole list,
//     hands each CIDR entry (in CIDRs' order, with its expiry) to a callback
//     as it goes, before the file is known to be good; the agent fills fresh
//     XDP tries with it and uses them only if the file verifies.
package deny

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Format names the deny file format; it is part of the signed message.
const Format = "rampart.deny.v2"

// Bounds on a deny file; larger files and longer values are refused.
const (
	MaxFileBytes   = 128 << 20
	MaxEntries     = 1 << 20
	MaxValueBytes  = 1024
	MaxReasonBytes = 256
)

// Errors a deny file can fail with; match them with errors.Is.
var (
	ErrMalformed = errors.New("malformed deny file")
	ErrDigest    = errors.New("deny list digest mismatch")
	ErrSignature = errors.New("deny list signature invalid")
	ErrInvalid   = errors.New("deny list invalid")
)

// Build validates entries and returns a signed deny file with the given
// sequence. Every entry needs a kind, a value and an expiry after now;
// duplicates (after canonical form: 10.1.2.3/8 is 10.0.0.0/8) are refused.
// Problems are reported together, naming each offending entry.
func Build(entries []Entry, seq uint64, priv ed25519.PrivateKey, now time.Time) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("deny build: private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	if len(entries) > MaxEntries {
		return nil, fmt.Errorf("%w: %d entries, over the %d limit", ErrInvalid, len(entries), MaxEntries)
	}
	ns := make([]norm, 0, len(entries))
	var problems []string
	for i, e := range entries {
		n, err := normalize(e)
		if err == nil && n.exp <= now.Unix() {
			err = fmt.Errorf("expires_at %s is not after now (%s)", e.ExpiresAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("entry %d (%s %.64q): %v", i+1, e.Kind, e.Value, err))
			continue
		}
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b norm) int { return compareNorm(&a, &b) })
	for i := 1; i < len(ns); i++ {
		if compareNorm(&ns[i-1], &ns[i]) == 0 {
			problems = append(problems, fmt.Sprintf("duplicate entry %s %.64q", ns[i].kind, ns[i].value))
		}
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("and %d more", len(problems)-20))
		}
		return nil, fmt.Errorf("%w:\n  %s", ErrInvalid, strings.Join(problems, "\n  "))
	}
	list, cuts := encodeList(ns)
	return seal(list, cuts, seq, priv, now.UnixNano())
}

// encodeList writes the canonical body of sorted entries and its cuts.
func encodeList(ns []norm) (list []byte, cuts []int) {
	list = make([]byte, 0, 64+len(ns)*96)
	list = append(list, `{"entries":[`...)
	var c cutter
	rec := 0
	for i := range ns {
		if i > 0 {
			list = append(list, ',')
			if c.after(list[rec:len(list)-1], len(list)) {
				cuts = append(cuts, len(list))
			}
		}
		rec = len(list)
		list = appendEntry(list, &ns[i])
	}
	return append(list, "]}"...), cuts
}

// seal wraps canonical list bytes in a signed envelope.
func seal(list []byte, cuts []int, seq uint64, priv ed25519.PrivateKey, created int64) ([]byte, error) {
	data, err := envelope.Seal(priv, Format, envelope.Version{Sequence: seq}, time.Unix(0, created), list, cuts)
	if err != nil {
		return nil, fmt.Errorf("deny build: %w", err)
	}
	return data, nil
}

func appendEntry(b []byte, n *norm) []byte {
	b = append(b, `{"kind":"`...)
	b = append(b, n.kind...)
	b = append(b, `","value":`...)
	b = appendString(b, n.value)
	b = append(b, `,"expires_at":"`...)
	b = time.Unix(n.exp, 0).UTC().AppendFormat(b, timeLayout)
	b = append(b, '"')
	if n.reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, n.reason)
	}
	return append(b, '}')
}

// appendString quotes s, escaping only '"' and '\' (control characters
// were refused by validation).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
