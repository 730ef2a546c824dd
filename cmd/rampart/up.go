package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/rampart-edge/rampart/quickstart"
)

func cmdUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := fs.String("dir", ".rampart", "state directory: keys, certificate, snapshots")
	admin := fs.String("admin", "127.0.0.1:9901", "admin listener")
	pprofOn := fs.Bool("pprof", false, "also serve Go's profiler on the admin listener under /debug/pprof/")
	accessLog := fs.String("access-log", "stdout", "access log: stdout, stderr, off, or a file path")
	printConfig := fs.Bool("print-config", false, "print the embedded example config and exit")
	_ = fs.Parse(args)
	if *printConfig {
		_, err := os.Stdout.Write(quickstart.DemoConfig())
		return err
	}
	alog, closeLog, err := openAccessLog(*accessLog)
	if err != nil {
		return err
	}
	defer closeLog()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return quickstart.Run(ctx, quickstart.Options{Dir: *dir, AdminAddr: *admin, Pprof: *pprofOn, Out: os.Stderr,
		AccessLog: alog, Logger: newLogger()})
}
