package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/rampart-edge/rampart/nodeconfig"
)

// cmdFirstboot is `rampart firstboot [-config F] [-out DIR] [-check]`: read
// node.yaml, validate it, and write the agent's and the proxy's environment
// files (and the anycast config, token and public key it carries) into DIR.
// rampart-firstboot.service runs it before the agent and the proxy; an
// error fails that unit, and they do not start.
func cmdFirstboot(args []string) error {
	fs := flag.NewFlagSet("firstboot", flag.ExitOnError)
	path := fs.String("config", "/etc/rampart/node.yaml", "the node's first-boot file")
	out := fs.String("out", "/etc/rampart", "where agent.env, proxy.env and the rest are written (the units read them there)")
	check := fs.Bool("check", false, "validate and print what would be written; write nothing")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	c, err := nodeconfig.Parse(data)
	if err != nil {
		return fmt.Errorf("%s:\n%w", *path, err)
	}
	files, err := c.Render(*out)
	if err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	if *check {
		fmt.Printf("%s: valid; would write into %s:\n", *path, *out)
		for _, f := range files {
			if f.Secret {
				fmt.Printf("--- %s (secret, %d bytes)\n", f.Name, len(f.Data))
				continue
			}
			fmt.Printf("--- %s\n%s", f.Name, f.Data)
		}
		return nil
	}
	wrote, err := nodeconfig.Write(*out, files)
	if err != nil {
		return err
	}
	fmt.Printf("rampart firstboot: node %s (region %s) from %s: wrote %d of %d files into %s %v\n",
		c.Node.ID, c.Node.Region, *path, len(wrote), len(files), *out, wrote)
	return nil
}
