package main

import (
	"crypto/ed25519"
	"fmt"
	"os"

	"github.com/rampart-edge/rampart/format/envelope"
)

// The flow the signed-document subcommands (snapshot, deny, regionstate)
// share; each format package builds and parses its own bytes.

// buildOrVerify runs "<cmd> build ARGS" or "<cmd> verify ARGS".
func buildOrVerify(cmd string, args []string, build, verify func([]string) error) error {
	if len(args) == 0 {
		return fmt.Errorf("want '%s build' or '%s verify'", cmd, cmd)
	}
	switch args[0] {
	case "build":
		return build(args[1:])
	case "verify":
		return verify(args[1:])
	}
	return fmt.Errorf("unknown %s command %q (want build or verify)", cmd, args[0])
}

// seal signs a document with the private key in keyPath (build makes the
// file's bytes), parses what was built with the key's public half, and
// only then writes it to out atomically: nothing is written for a
// document that does not parse back.
func seal[T any](keyPath, out string, build func(ed25519.PrivateKey) ([]byte, error),
	parse func([]byte, ed25519.PublicKey) (T, error)) (doc T, file []byte, err error) {
	priv, err := envelope.ReadPrivateKey(keyPath)
	if err != nil {
		return doc, nil, err
	}
	if file, err = build(priv); err != nil {
		return doc, nil, err
	}
	if doc, err = parse(file, priv.Public().(ed25519.PublicKey)); err != nil {
		return doc, nil, fmt.Errorf("verify what was built: %w", err)
	}
	if err := envelope.WriteFileAtomic(out, file, 0o644); err != nil {
		return doc, nil, err
	}
	return doc, file, nil
}

// openSigned reads the public key in pubPath and the signed file path (a what),
// and parses it.
func openSigned[T any](pubPath, path, what string, parse func([]byte, ed25519.PublicKey) (T, error)) (doc T, pub ed25519.PublicKey, err error) {
	if pub, err = envelope.ReadPublicKey(pubPath); err != nil {
		return doc, nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return doc, nil, fmt.Errorf("read %s: %w", what, err)
	}
	if doc, err = parse(data, pub); err != nil {
		return doc, nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, pub, nil
}
