package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func cmdSnapshot(args []string) error {
	if len(args) == 0 {
		return errors.New("want 'snapshot build' or 'snapshot verify'")
	}
	switch args[0] {
	case "build":
		return snapshotBuild(args[1:])
	case "verify":
		return snapshotVerify(args[1:])
	}
	return fmt.Errorf("unknown snapshot command %q (want build or verify)", args[0])
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
	data, err := os.ReadFile(*cfgPath)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	cfg, err := snapshot.ParseYAML(data)
	if err != nil {
		return fmt.Errorf("%s: %w", *cfgPath, err)
	}
	if *epoch != 0 {
		cfg.Version.Epoch = *epoch
	}
	if *seq != 0 {
		cfg.Version.Sequence = *seq
	}
	priv, err := envelope.ReadPrivateKey(*keyPath)
	if err != nil {
		return err
	}
	start := time.Now()
	file, err := snapshot.Build(cfg, priv, time.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", *cfgPath, err)
	}
	if err := envelope.WriteFileAtomic(*out, file, 0o644); err != nil {
		return err
	}
	s, err := snapshot.Parse(file, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return fmt.Errorf("verify what was written: %w", err)
	}
	fmt.Printf("wrote %s: %s version %s, digest %s, %d routes, %d clusters, %d bytes, compiled in %s\n",
		*out, snapshot.Format, s.Version, s.DigestHex(), len(cfg.Routes), len(cfg.Clusters), len(file), time.Since(start).Round(time.Millisecond))
	return nil
}

func snapshotVerify(args []string) error {
	fs := flag.NewFlagSet("snapshot verify", flag.ExitOnError)
	pubPath := fs.String("pub", "", "Ed25519 public key, PEM (required)")
	_ = fs.Parse(args)
	if *pubPath == "" || fs.NArg() != 1 {
		fs.Usage()
		return errors.New("usage: rampart snapshot verify -pub KEY.pub FILE.snap")
	}
	pub, err := envelope.ReadPublicKey(*pubPath)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	s, err := snapshot.Parse(data, pub)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	fmt.Printf("ok %s: %s version %s, digest %s, key %s, created %s, %d routes, %d clusters, %d listeners\n",
		fs.Arg(0), snapshot.Format, s.Version, s.DigestHex(), s.KeyID, s.CreatedAt.UTC().Format(time.RFC3339),
		len(s.Config.Routes), len(s.Config.Clusters), len(s.Config.Listeners))
	return nil
}
