package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

func cmdRegionState(args []string) error {
	return buildOrVerify("regionstate", args, regionStateBuild, regionStateVerify)
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
	s, err := readSource(*in, "region-state source", func(b []byte) (*regionstate.State, error) { return regionstate.ParseYAML(b, v, time.Now()) })
	if err != nil {
		return err
	}
	_, file, err := seal(*in, *keyPath, *out, func(priv ed25519.PrivateKey) ([]byte, error) { return regionstate.Build(priv, s) }, regionstate.Parse)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: version %s, %d regions, %d platforms, %d bytes\n", *out, s.Version, len(s.Regions), len(s.Platforms), len(file))
	return nil
}

func regionStateVerify(args []string) error {
	s, pub, path, err := verifySigned("regionstate", "key", "region-state file", args, regionstate.Parse)
	if err != nil {
		return err
	}
	now := time.Now()
	fmt.Printf("ok %s: version %s, key %s, created %s (%s ago)\n", path, s.Version, envelope.KeyID(pub),
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
