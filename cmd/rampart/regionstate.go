package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

func cmdRegionState(args []string) error {
	if len(args) == 0 {
		return errors.New("want 'regionstate build' or 'regionstate verify'")
	}
	switch args[0] {
	case "build":
		return regionStateBuild(args[1:])
	case "verify":
		return regionStateVerify(args[1:])
	}
	return fmt.Errorf("unknown regionstate command %q (want build or verify)", args[0])
}

func regionStateBuild(args []string) error {
	fs := flag.NewFlagSet("regionstate build", flag.ExitOnError)
	in := fs.String("in", "", "YAML source: regions and platforms (README: Region state) (required)")
	keyPath := fs.String("key", "", "Ed25519 private key, PEM (required)")
	epoch := fs.Uint64("epoch", 0, "epoch of this document")
	seq := fs.Uint64("sequence", 0, "sequence of this document; (epoch, sequence) above the one in force and not 0.0")
	out := fs.String("out", "", "region-state file to write (required)")
	_ = fs.Parse(args)
	v := envelope.Version{Epoch: *epoch, Sequence: *seq}
	if *in == "" || *keyPath == "" || *out == "" || v.IsZero() || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("usage: rampart regionstate build -in STATE.yaml -key KEY -epoch E -sequence S -out FILE")
	}
	src, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("read region-state source: %w", err)
	}
	s, err := regionstate.ParseYAML(src, v, time.Now())
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	priv, err := envelope.ReadPrivateKey(*keyPath)
	if err != nil {
		return err
	}
	file, err := regionstate.Build(priv, s)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if _, err := regionstate.Parse(file, priv.Public().(ed25519.PublicKey)); err != nil {
		return fmt.Errorf("verify what was built: %w", err)
	}
	if err := envelope.WriteFileAtomic(*out, file, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s: version %s, %d regions, %d platforms, %d bytes\n", *out, s.Version, len(s.Regions), len(s.Platforms), len(file))
	return nil
}

func regionStateVerify(args []string) error {
	fs := flag.NewFlagSet("regionstate verify", flag.ExitOnError)
	pubPath := fs.String("key", "", "Ed25519 public key, PEM (required)")
	_ = fs.Parse(args)
	if *pubPath == "" || fs.NArg() != 1 {
		fs.Usage()
		return errors.New("usage: rampart regionstate verify -key KEY.pub FILE")
	}
	pub, err := envelope.ReadPublicKey(*pubPath)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("read region-state file: %w", err)
	}
	s, err := regionstate.Parse(data, pub)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	now := time.Now()
	fmt.Printf("ok %s: version %s, key %s, created %s (%s ago)\n", fs.Arg(0), s.Version, envelope.KeyID(pub),
		s.Created.Format(time.RFC3339Nano), now.Sub(s.Created).Round(time.Millisecond))
	for _, r := range s.Regions {
		var flags []string
		if r.Healthy {
			flags = append(flags, "healthy")
		} else {
			flags = append(flags, "unhealthy")
		}
		if r.Draining {
			flags = append(flags, "draining")
		}
		fmt.Printf("  region %s: %s, serves config %s\n", r.Name, strings.Join(flags, ", "), r.ConfigVersion)
	}
	for _, p := range s.Platforms {
		writer := "none known"
		if p.Writer != "" {
			writer = fmt.Sprintf("%s (epoch %d)", p.Writer, p.WriterEpoch)
		}
		fmt.Printf("  platform %s: writer %s\n", p.Name, writer)
		for _, r := range p.Replicas {
			fmt.Printf("    replica %s: lag %d ms, observed %s ago\n", r.Region, r.LagMs, now.Sub(r.ObservedAt).Round(time.Millisecond))
		}
	}
	return nil
}
