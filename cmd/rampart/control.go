package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/cli"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/server"
)

// cmdControl runs the control plane (`rampart control -config FILE`),
// makes an API token (`rampart control token`), or runs an operator
// command against a running control plane (`rampart control submit ...`,
// control/cli).
func cmdControl(args []string) error {
	if len(args) > 0 && args[0] == "token" {
		return controlToken(args[1:])
	}
	if len(args) > 0 && cli.IsCommand(args[0]) {
		return cli.Main(args, cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	}
	fs := flag.NewFlagSet("control", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: rampart control -config FILE   (the control plane)\n       rampart control token\n\n")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+cli.Usage)
	}
	path := fs.String("config", "/etc/rampart/control.yaml", "control plane config file (see control/README.md)")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %v (want: rampart control -config FILE, rampart control token, or one of the commands %v)", fs.Args(), cli.Commands)
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
