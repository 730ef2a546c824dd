// Command deb builds rampart's Debian package (`make deb`) with nfpm used
// as a library: the binary, the systemd units of images/systemd/, the
// default configs, sysctl and tmpfiles settings of images/etc/ and the
// maintainer scripts of images/deb/scripts/.
//
// It lives in a Go module of its own so rampart's go.mod does not carry
// nfpm's dependencies.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.Root, "root", "../..", "the rampart repository (images/ is read from it)")
	flag.StringVar(&o.Binary, "binary", "", "the rampart binary to package (required)")
	flag.StringVar(&o.Version, "version", "", "Debian package version, e.g. 0.0.0~git20261202063300.d957f73 (required)")
	flag.StringVar(&o.Arch, "arch", "amd64", "Debian architecture of the binary")
	flag.StringVar(&o.OutDir, "out", "dist", "directory the .deb is written to")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "deb: unexpected arguments %v\n", flag.Args())
		os.Exit(2)
	}
	start := time.Now()
	path, size, err := build(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "deb: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%d bytes, %.1f MiB) in %s\n", path, size, float64(size)/(1<<20), time.Since(start).Round(time.Millisecond))
}
