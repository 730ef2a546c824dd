package main

import (
	"os"

	"github.com/rampart-edge/rampart/anycast"
)

// cmdAnycast is `rampart anycast status|drain|undrain` (anycast.Command).
func cmdAnycast(args []string) error { return anycast.Command(args, os.Stdout) }
