package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/server"
)

// cmdControl runs the control plane (`rampart control -config FILE`) or
// makes an API token (`rampart control token`).
func cmdControl(args []string) error {
	if len(args) > 0 && args[0] == "token" {
		return controlToken(args[1:])
	}
	fs := flag.NewFlagSet("control", flag.ExitOnError)
	path := fs.String("config", "/etc/rampart/control.yaml", "control plane config file (see control/README.md)")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %v (want: rampart control -config FILE, or rampart control token)", fs.Args())
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return server.Run(ctx, cfg, newLogger())
}

// controlToken prints a new random token and the sha256 a config holds.
func controlToken(args []string) error {
	fs := flag.NewFlagSet("control token", flag.ExitOnError)
	_ = fs.Parse(args)
	tok, sum, err := api.NewToken()
	if err != nil {
		return err
	}
	fmt.Printf("token:  %s\nsha256: %s\n", tok, sum)
	return nil
}
