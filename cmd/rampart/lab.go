package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rampart-edge/rampart/lab"
	"github.com/rampart-edge/rampart/lab/pktgen"
)

const labUsage = `rampart lab up|down|status|drill NAME|upstream   (lab/README.md)
  up      [-dir .rampart-lab] [-prefix rl] [-config FILE]   build the lab (removes a lab left in -dir first)
  down    [-dir .rampart-lab]                                remove everything the lab made
  status  [-dir .rampart-lab]                                processes and the router's view of each VIP
  drill   [-dir .rampart-lab] NAME                           run a failure drill; exit 1 when it fails
  upstream -listen ADDR -site S -region R -name N            a lab upstream (the lab starts these)
  pktgen  [flags]                                            AF_PACKET packet generator (lab/pktgen/README.md)
`

// cmdLab is `rampart lab ...`.
func cmdLab(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, labUsage)
		return fmt.Errorf("a subcommand is needed")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("lab "+sub, flag.ExitOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labUsage); fs.PrintDefaults() }
	dir := fs.String("dir", lab.DefaultStateDir, "the lab's state directory")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch sub {
	case "up":
		prefix := fs.String("prefix", "rl", "namespace name prefix")
		config := fs.String("config", "", "snapshot config YAML to submit (default: the lab's demo config)")
		_ = fs.Parse(args)
		o := lab.Options{Dir: *dir, Prefix: *prefix, Out: os.Stderr}
		if *config != "" {
			b, err := os.ReadFile(*config)
			if err != nil {
				return fmt.Errorf("-config: %w", err)
			}
			o.Config = b
		}
		start := time.Now()
		l, err := lab.Up(ctx, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "lab up in %s\n", time.Since(start).Round(time.Millisecond))
		l.PrintHelp(os.Stdout)
		return nil
	case "down":
		_ = fs.Parse(args)
		if err := lab.Down(*dir); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "lab in %s removed\n", *dir)
		return nil
	case "status":
		_ = fs.Parse(args)
		l, err := lab.Load(*dir)
		if err != nil {
			return err
		}
		l.Status(os.Stdout)
		return nil
	case "drill":
		_ = fs.Parse(args)
		if fs.NArg() != 1 {
			return fmt.Errorf("drill: name one drill (%v)", lab.Drills())
		}
		l, err := lab.Load(*dir)
		if err != nil {
			return err
		}
		_, err = lab.RunDrill(ctx, l, fs.Arg(0), os.Stdout)
		return err
	case "pktgen":
		return pktgen.Command(ctx, args, os.Stdout)
	case "upstream":
		listen := fs.String("listen", "127.0.0.1:9081", "listen address")
		site := fs.String("site", "", "the site it names")
		region := fs.String("region", "", "the region it names")
		name := fs.String("name", "a", "the upstream's name")
		_ = fs.Parse(args)
		return lab.ServeUpstream(ctx, *listen, *site, *region, *name)
	default:
		fmt.Fprint(os.Stderr, labUsage)
		return fmt.Errorf("unknown subcommand %q", sub)
	}
}
