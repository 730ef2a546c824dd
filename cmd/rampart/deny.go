package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"os"
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
	data, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("read entries: %w", err)
	}
	now := time.Now()
	entries, err := deny.ParseYAML(data, now)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	l, file, err := seal(*keyPath, *out, func(priv ed25519.PrivateKey) ([]byte, error) {
		file, err := deny.Build(entries, *seq, priv, now)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", *in, err)
		}
		return file, nil
	}, deny.Parse)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: sequence %d, sha256 %s, %s, %d bytes\n", *out, l.Sequence(), l.DigestHex(), counts(l), len(file))
	return nil
}

func denyVerify(args []string) error {
	fs := flag.NewFlagSet("deny verify", flag.ExitOnError)
	pubPath := fs.String("pub", "", "Ed25519 public key, PEM (required)")
	_ = fs.Parse(args)
	if *pubPath == "" || fs.NArg() != 1 {
		fs.Usage()
		return errors.New("usage: rampart deny verify -pub KEY.pub FILE")
	}
	l, _, err := openSigned(*pubPath, fs.Arg(0), "deny file", deny.Parse)
	if err != nil {
		return err
	}
	fmt.Printf("ok %s: sequence %d, sha256 %s, key %s, created %s, %s, %d CIDRs in force now\n",
		fs.Arg(0), l.Sequence(), l.DigestHex(), l.KeyID(), l.CreatedAt().UTC().Format(time.RFC3339),
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
