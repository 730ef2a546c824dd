package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// version and commit are set at link time from git by `make build` and
// `make deb`:
//
//	-ldflags "-X main.version=$(git describe --tags --always --dirty) -X main.commit=$(git rev-parse HEAD)"
//
// A plain `go build` leaves them empty; printVersion then falls back to
// what the Go toolchain recorded (the module version and VCS stamp, when
// those were built in).
var (
	version string
	commit  string
)

// cmdVersion prints the version, the commit and the Go version rampart
// was built with (`rampart version`).
func cmdVersion(args []string) error {
	fs := flag.NewFlagSet("version", flag.ExitOnError)
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v (want: rampart version)", fs.Args())
	}
	info, _ := debug.ReadBuildInfo()
	printVersion(os.Stdout, info)
	return nil
}

// printVersion writes three lines, "version: ...", "commit: ..." and
// "go: ...". Empty link-time values fall back to the build info; with
// nothing recorded they read "unknown".
func printVersion(w io.Writer, info *debug.BuildInfo) {
	v, c := version, commit
	if info != nil {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if v == "" {
		v = "unknown"
	}
	if c == "" {
		c = "unknown"
	}
	fmt.Fprintf(w, "version: %s\ncommit:  %s\ngo:      %s\n", v, c, runtime.Version())
}
