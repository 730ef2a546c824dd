package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func cmdKeygen(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ExitOnError)
	out := fs.String("out", "snapshot", "write OUT.key (private, mode 0600) and OUT.pub")
	force := fs.Bool("force", false, "overwrite existing files")
	_ = fs.Parse(args)
	privPath, pubPath := *out+".key", *out+".pub"
	if !*force {
		for _, p := range []string{privPath, pubPath} {
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("%s exists (use -force to overwrite)", p)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	priv, pub, err := snapshot.GenerateKey()
	if err != nil {
		return err
	}
	if err := os.WriteFile(privPath, priv, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", privPath, err)
	}
	if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", pubPath, err)
	}
	k, err := snapshot.ParsePublicKey(pub)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s (key id %s)\n", privPath, pubPath, snapshot.KeyID(k))
	return nil
}
