package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
)

// cmdPurge appends a purge rule to the signed purge document that proxies
// watch (-purge-file): the objects stored before now that match every
// given selector go from every proxy's cache within a second.
func cmdPurge(args []string) error {
	fs := flag.NewFlagSet("purge", flag.ExitOnError)
	file := fs.String("file", "", "the signed purge document to update (created when absent) (required)")
	keyPath := fs.String("key", "", "Ed25519 private key, PEM (required)")
	route := fs.String("route", "", "purge the objects of this route id")
	prefix := fs.String("prefix", "", "purge the objects whose key (host+path?query as routed) starts with this")
	surrogate := fs.String("surrogate-key", "", "purge the objects whose Surrogate-Key response header names this key")
	_ = fs.Parse(args)
	if *file == "" || *keyPath == "" || fs.NArg() > 0 || (*route == "" && *prefix == "" && *surrogate == "") {
		fs.Usage()
		return errors.New("usage: rampart purge -file PURGE.json -key KEY [-route ID] [-prefix HOST/PATH] [-surrogate-key K]")
	}
	priv, err := envelope.ReadPrivateKey(*keyPath)
	if err != nil {
		return err
	}
	pub := priv.Public().(ed25519.PublicKey)
	var cur *purge.Document
	data, err := os.ReadFile(*file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read purge document: %w", err)
	default:
		if cur, err = purge.Parse(data, pub); err != nil {
			return fmt.Errorf("%s: %w", *file, err)
		}
	}
	next := purge.Append(cur, time.Now(), *route, *prefix, *surrogate)
	out, err := purge.Build(priv, next)
	if err != nil {
		return err
	}
	if err := envelope.WriteFileAtomic(*file, out, 0o644); err != nil {
		return err
	}
	r := next.Rules[len(next.Rules)-1]
	fmt.Printf("wrote %s: version %s, rule %d (route %q, prefix %q, surrogate key %q), %d rules\n",
		*file, next.Version, r.ID, r.Route, r.Prefix, r.SurrogateKey, len(next.Rules))
	return nil
}
