package main

import (
	"crypto/ed25519"
	"flag"
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

// readSource reads the source file path (a what, for the error) and
// parses it; a parse error is prefixed with the path.
func readSource[T any](path, what string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", what, err)
	}
	v, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// seal signs a document made from the source file src with the private
// key in keyPath (build makes the file's bytes; its error is prefixed with
// src), parses what was built with the key's public half, and only then
// writes it to out atomically: nothing is written for a document that does
// not parse back.
func seal[T any](src, keyPath, out string, build func(ed25519.PrivateKey) ([]byte, error),
	parse func([]byte, ed25519.PublicKey) (T, error)) (doc T, file []byte, err error) {
	priv, err := envelope.ReadPrivateKey(keyPath)
	if err != nil {
		return doc, nil, err
	}
	if file, err = build(priv); err != nil {
		return doc, nil, fmt.Errorf("%s: %w", src, err)
	}
	if doc, err = parse(file, priv.Public().(ed25519.PublicKey)); err != nil {
		return doc, nil, fmt.Errorf("verify what was built: %w", err)
	}
	if err := envelope.WriteFileAtomic(out, file, 0o644); err != nil {
		return doc, nil, err
	}
	return doc, file, nil
}

// verifySigned is "<cmd> verify -<keyFlag> KEY.pub FILE": it reads the
// public key and the signed file (a what, for the error) and parses it.
func verifySigned[T any](cmd, keyFlag, what string, args []string, parse func([]byte, ed25519.PublicKey) (T, error)) (doc T, pub ed25519.PublicKey, path string, err error) {
	fs := flag.NewFlagSet(cmd+" verify", flag.ExitOnError)
	pubPath := fs.String(keyFlag, "", "Ed25519 public key, PEM (required)")
	_ = fs.Parse(args)
	if *pubPath == "" || fs.NArg() != 1 {
		fs.Usage()
		return doc, nil, "", fmt.Errorf("usage: rampart %s verify -%s KEY.pub FILE", cmd, keyFlag)
	}
	path = fs.Arg(0)
	doc, pub, err = openSigned(*pubPath, path, what, parse)
	return doc, pub, path, err
}

// openSigned reads the public key in pubPath and the signed file path (a
// what), and parses it.
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
