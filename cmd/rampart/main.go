// Command rampart is the one binary of the rampart edge appliance.
package main

import (
	"fmt"
	"os"
)

const usage = `rampart — eBPF-assisted L4/L7 edge appliance

Usage:
  rampart up        [flags]   all-in-one quickstart on loopback (demo config and upstreams)
  rampart proxy     [flags]   serve traffic from signed snapshots in a directory
  rampart control   [flags]   the control plane: revisions, staged rollouts, deny channel (-config FILE)
  rampart control token       make an API token and the sha256 a control config holds
  rampart control submit|diff|rollout|revisions|fleet|deny|nodes|regions|drain-region|undrain-region|platforms|writer   operator commands against a control plane (rampart control -h)
  rampart snapshot build      validate, compile and sign a YAML config into a snapshot file
  rampart snapshot verify     check a snapshot file; print its version and digest
  rampart route check         run a table of requests through the routes and the regional policy (-config, -region-state, -cases)
  rampart deny build          sign a YAML list of revocations into a deny file
  rampart deny verify         check a deny file; print its sequence, digest and counts
  rampart regionstate build   sign a YAML region state (health, served config, replica lag, writers) into a region-state file
  rampart regionstate verify  check a region-state file; print its version, age and signals
  rampart purge               add a cache purge rule (-route, -prefix, -surrogate-key) to the signed purge document proxies watch (-purge-file)
  rampart agent     [flags]   node agent: XDP, sk_lookup steering, VIPs, anycast (rampart agent teardown: detach everything)
  rampart anycast status -addr ADDR   sessions, VIPs, inputs and guard of a node agent
  rampart anycast drain|undrain -addr ADDR -token-file F [-vip V] [-reason R]   operator drain of a node agent's VIPs
  rampart keygen    [flags]   make an Ed25519 key pair for signing snapshots
  rampart firstboot [-config F] [-out DIR] [-check]   read /etc/rampart/node.yaml, write the agent's and proxy's env files (images/rootfs/README.md)
  rampart lab up|down|status|drill NAME   the lab: regions of nodes in network namespaces, failure drills (lab/README.md)
  rampart get [-http3] URL    fetch a URL (HTTP/1.1, HTTP/2 or HTTP/3) to try a listener by hand
  rampart version             version, commit and Go version of this binary

Run 'rampart <command> -h' for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"up":          cmdUp,
		"proxy":       cmdProxy,
		"snapshot":    cmdSnapshot,
		"keygen":      cmdKeygen,
		"deny":        cmdDeny,
		"regionstate": cmdRegionState,
		"purge":       cmdPurge,
		"control":     cmdControl,
		"anycast":     cmdAnycast,
		"agent":       cmdAgent,
		"get":         cmdGet,
		"route":       cmdRoute,
		"firstboot":   cmdFirstboot,
		"lab":         cmdLab,
		"version":     cmdVersion,
	}
	name, args := os.Args[1], os.Args[2:]
	if name == "-h" || name == "--help" || name == "help" {
		fmt.Print(usage)
		return
	}
	run, ok := cmds[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "rampart: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	if err := run(args); err != nil {
		fmt.Fprintf(os.Stderr, "rampart %s: %v\n", name, err)
		os.Exit(1)
	}
}
