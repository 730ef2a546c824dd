package main

import (
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/routecheck"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// cmdRoute is `rampart route check`: exit 0 when every case passes, 1 on
// a mismatch, 2 on bad input.
func cmdRoute(args []string) error {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(os.Stderr, "rampart route: want 'route check -config X.yaml -region-state S -cases cases.yaml'")
		os.Exit(2)
	}
	code, err := routeCheck(args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rampart route check: %v\n", err)
	}
	if code != 0 {
		os.Exit(code)
	}
	return nil
}

func routeCheck(args []string, stdout io.Writer) (int, error) {
	fs := flag.NewFlagSet("route check", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "YAML config, as for snapshot build (required)")
	statePath := fs.String("region-state", "", "region state: a signed file (with -key), or a .yaml fixture in the source form; none: every signal unknown")
	keyPath := fs.String("key", "", "Ed25519 public key (PEM) that verifies a signed -region-state")
	casesPath := fs.String("cases", "", "YAML table of cases (required)")
	nowFlag := fs.String("now", "", "decide as of this RFC 3339 time (default: the signed state's creation time, else now)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0, nil
	} else if err != nil {
		return 2, err
	}
	if *cfgPath == "" || *casesPath == "" || fs.NArg() != 0 {
		fs.Usage()
		return 2, errors.New("-config and -cases are required, and nothing else")
	}
	now := time.Now().UTC()
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339Nano, *nowFlag)
		if err != nil {
			return 2, fmt.Errorf("-now: %w", err)
		}
		now = t
	}
	data, err := os.ReadFile(*cfgPath)
	if err != nil {
		return 2, fmt.Errorf("read config: %w", err)
	}
	cfg, err := snapshot.ParseYAML(data)
	if err != nil {
		return 2, fmt.Errorf("%s: %w", *cfgPath, err)
	}
	var state *regionstate.State
	if *statePath != "" {
		var pub ed25519.PublicKey
		if *keyPath != "" {
			if pub, err = envelope.ReadPublicKey(*keyPath); err != nil {
				return 2, err
			}
		}
		raw, err := os.ReadFile(*statePath)
		if err != nil {
			return 2, fmt.Errorf("read region state: %w", err)
		}
		if state, err = routecheck.LoadState(*statePath, raw, pub, now); err != nil {
			return 2, err
		}
		if *nowFlag == "" {
			now = state.Created
		}
	}
	raw, err := os.ReadFile(*casesPath)
	if err != nil {
		return 2, fmt.Errorf("read cases: %w", err)
	}
	cases, err := routecheck.ParseCases(raw)
	if err != nil {
		return 2, fmt.Errorf("%s: %w", *casesPath, err)
	}
	c, err := routecheck.New(cfg, state, now)
	if err != nil {
		return 2, fmt.Errorf("%s: %w", *cfgPath, err)
	}
	res, err := c.Run(cases, now)
	if err != nil {
		return 2, fmt.Errorf("%s: %w", *casesPath, err)
	}
	failed, err := routecheck.Write(stdout, res)
	if err != nil {
		return 2, err
	}
	if failed > 0 {
		return 1, fmt.Errorf("%d of %d cases do not match", failed, len(res))
	}
	return 0, nil
}
