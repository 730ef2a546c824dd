package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func cmdSnapshot(args []string) error {
	return buildOrVerify("snapshot", args, snapshotBuild, snapshotVerify)
}

func snapshotBuild(args []string) error {
	fs := flag.NewFlagSet("snapshot build", flag.ExitOnError)
	cfgPath := fs.String("config", "", "YAML config to compile (required)")
	keyPath := fs.String("key", "", "Ed25519 private key, PEM (required)")
	out := fs.String("out", "", "snapshot file to write (required)")
	epoch := fs.Uint64("epoch", 0, "override the config's version epoch")
	seq := fs.Uint64("sequence", 0, "override the config's version sequence")
	_ = fs.Parse(args)
	if *cfgPath == "" || *keyPath == "" || *out == "" {
		fs.Usage()
		return errors.New("-config, -key and -out are required")
	}
	cfg, err := readSource(*cfgPath, "config", snapshot.ParseYAML)
	if err != nil {
		return err
	}
	if *epoch != 0 {
		cfg.Version.Epoch = *epoch
	}
	if *seq != 0 {
		cfg.Version.Sequence = *seq
	}
	start := time.Now()
	s, file, err := seal(*cfgPath, *keyPath, *out, func(priv ed25519.PrivateKey) ([]byte, error) { return snapshot.Build(cfg, priv, time.Now()) }, snapshot.Parse)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s version %s, digest %s, %d routes, %d clusters, %d bytes, compiled in %s\n",
		*out, snapshot.Format, s.Version, s.DigestHex(), len(cfg.Routes), len(cfg.Clusters), len(file), time.Since(start).Round(time.Millisecond))
	return nil
}

func snapshotVerify(args []string) error {
	s, _, path, err := verifySigned("snapshot", "pub", "snapshot", args, snapshot.Parse)
	if err != nil {
		return err
	}
	fmt.Printf("ok %s: %s version %s, digest %s, key %s, created %s, %d routes, %d clusters, %d listeners\n",
		path, snapshot.Format, s.Version, s.DigestHex(), s.KeyID, s.CreatedAt.UTC().Format(time.RFC3339),
		len(s.Config.Routes), len(s.Config.Clusters), len(s.Config.Listeners))
	return nil
}
