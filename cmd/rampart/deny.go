package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/deny"
)

func cmdDeny(args []string) error { return buildOrVerify("deny", args, denyBuild, denyVerify) }

func denyBuild(args []string) error {
	fs := flag.NewFlagSet("deny build", flag.ExitOnError)
	in := fs.String("in", "", "YAML list of entries: kind, value, expires_at (RFC 3339) or ttl (\"1h\"), reason (required)")
	keyPath := fs.String("key", "", "Ed25519 private key, PEM (required)")
	seq := fs.Uint64("sequence", 0, "sequence of this list, above the one in force (required, > 0)")
	out := fs.String("out", "", "deny file to write (required)")
	_ = fs.Parse(args)
	if *in == "" || *keyPath == "" || *out == "" || *seq == 0 || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("usage: rampart deny build -in ENTRIES.yaml -key KEY -sequence N -out FILE")
	}
	now := time.Now()
	entries, err := readSource(*in, "entries", func(b []byte) ([]deny.Entry, error) { return deny.ParseYAML(b, now) })
	if err != nil {
		return err
	}
	l, file, err := seal(*in, *keyPath, *out, func(priv ed25519.PrivateKey) ([]byte, error) { return deny.Build(entries, *seq, priv, now) }, deny.Parse)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: sequence %d, sha256 %s, %s, %d bytes\n", *out, l.Sequence(), l.DigestHex(), counts(l), len(file))
	return nil
}

func denyVerify(args []string) error {
	l, _, path, err := verifySigned("deny", "pub", "deny file", args, deny.Parse)
	if err != nil {
		return err
	}
	fmt.Printf("ok %s: sequence %d, sha256 %s, key %s, created %s, %s, %d CIDRs in force now\n",
		path, l.Sequence(), l.DigestHex(), l.KeyID(), l.CreatedAt().UTC().Format(time.RFC3339),
		counts(l), len(l.CIDRs(time.Now())))
	return nil
}

// counts says "N entries (kind n, ...)" for the kinds present.
func counts(l *deny.List) string {
	var parts []string
	for _, k := range deny.Kinds() {
		if n := l.Count(k); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) == 0 {
		return "0 entries"
	}
	return fmt.Sprintf("%d entries (%s)", l.Len(), strings.Join(parts, ", "))
}
