package pktgen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// Command is `rampart lab pktgen [flags]`: it parses args, runs the
// generator and prints its report to out.
func Command(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("lab pktgen", flag.ContinueOnError)
	fs.SetOutput(out)
	var c Config
	fs.StringVar(&c.NetNS, "netns", "", "network namespace to send from, a path (/run/netns/NAME); default: this process's")
	fs.StringVar(&c.Iface, "iface", "", "interface to send on (required)")
	srcCIDR := fs.String("src-cidr", "", "spoof sources from this prefix (required), e.g. 198.51.100.0/24 or fd00:1::/64")
	fs.BoolVar(&c.Sequential, "sequential", false, "sources in order instead of at random")
	sport := fs.Uint("sport", 0, "source port (0: 49152 + packet number mod 16384)")
	dst := fs.String("dst", "", "destination address:port, e.g. 203.0.113.10:80 or [2001:db8::10]:80 (required)")
	kind := fs.String("proto", "syn", "syn (TCP SYN), ack (TCP ACK) or udp")
	fs.IntVar(&c.Payload, "payload", 0, "payload bytes")
	dstMAC := fs.String("dst-mac", "", "destination MAC (default: the next hop's neighbour entry)")
	fs.Float64Var(&c.Rate, "rate", 0, "frames per second, paced (0: as fast as possible)")
	fs.DurationVar(&c.Duration, "duration", 0, "how long to send (default 10s when -count is 0)")
	fs.Uint64Var(&c.Count, "count", 0, "how many frames to send (0: until -duration)")
	fs.IntVar(&c.Batch, "batch", 64, "frames per sendmmsg call (1–1024)")
	fs.IntVar(&c.Workers, "workers", 1, "sending sockets, one goroutine each")
	fs.BoolVar(&c.QdiscBypass, "qdisc-bypass", true, "PACKET_QDISC_BYPASS (skip the interface's qdisc)")
	fs.Uint64Var(&c.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the random sources")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || c.Iface == "" || *srcCIDR == "" || *dst == "" {
		fs.Usage()
		return errors.New("usage: rampart lab pktgen -iface IF -src-cidr PREFIX -dst ADDR:PORT [-rate PPS] [-duration D | -count N] [flags]")
	}
	var err error
	if c.SrcCIDR, err = netip.ParsePrefix(*srcCIDR); err != nil {
		return fmt.Errorf("-src-cidr: %w", err)
	}
	if c.Dst, err = netip.ParseAddrPort(*dst); err != nil {
		return fmt.Errorf("-dst: %w", err)
	}
	if c.Kind, err = ParseKind(*kind); err != nil {
		return fmt.Errorf("-proto: %w", err)
	}
	if *sport > 65535 {
		return fmt.Errorf("-sport %d: above 65535", *sport)
	}
	c.SrcPort = uint16(*sport)
	if *dstMAC != "" {
		if c.DstMAC, err = net.ParseMAC(*dstMAC); err != nil || len(c.DstMAC) != 6 {
			return fmt.Errorf("-dst-mac %q: not a 6-byte MAC address (%v)", *dstMAC, err)
		}
	}
	if c.Duration == 0 && c.Count == 0 {
		c.Duration = 10 * time.Second
	}
	rep, err := Run(ctx, c)
	fmt.Fprintln(out, rep)
	return err
}
