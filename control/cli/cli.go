package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Env is what a command reads and writes besides its arguments.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Environment variables the commands read.
const (
	EnvServer = "RAMPART_SERVER" // the control plane's URL
	EnvToken  = "RAMPART_TOKEN"  // the API token
)

// DefaultServer is the control plane's default listen address.
const DefaultServer = "http://127.0.0.1:9080"

// Commands are the client subcommands of `rampart control`.
var Commands = []string{"submit", "diff", "rollout", "revisions", "fleet", "deny", "purge", "nodes",
	"regions", "drain-region", "undrain-region", "platforms", "writer"}

// IsCommand reports whether name is a client subcommand.
func IsCommand(name string) bool {
	for _, c := range Commands {
		if c == name {
			return true
		}
	}
	return false
}

// Usage lists the subcommands.
const Usage = `rampart control — operator commands against a running control plane

  submit -f FILE [-message M] [-idempotency-key K]   submit a config (YAML, or JSON for *.json; - for stdin)
  diff REV [-from REV]                               routes and sections changed (default -from: its baseline, else the stable revision)
  rollout status [REV]                               open rollouts (or the newest), or one rollout with its stages
  rollout status REV -wait [-timeout D]              follow it until it ends; exit 1 unless it is done
  rollout pause|resume|abort REV [-reason R]         steer a rollout
  revisions [-limit N]                               newest first
  fleet                                              every node: stage, versions, health, refusals
  deny list | add KIND VALUE [-ttl D] [-reason R] | add -f FILE | remove KIND VALUE
  purge -route R | -prefix HOST/PATH | -surrogate-key K   cache purge on every node within a second (admin); several: all must match
  purge list                                         the rules the purge document lists
  nodes list | enroll ID | revoke ID
  regions                                            every region: health by the rule, why, nodes, served version, drain
  drain-region REGION [-reason R] | undrain-region REGION   drain a whole region through the region state (admin)
  platforms                                          every platform: writer, fencing epoch, replica lags
  writer set PLATFORM REGION [-expected-epoch N]     explicit primary switch: the epoch goes up by one (admin)

Common flags (after the subcommand):
  -server URL        control plane (default $RAMPART_SERVER, else http://127.0.0.1:9080)
  -token-file FILE   file holding the API token (default: $RAMPART_TOKEN)
  -token TOKEN       the token itself (discouraged: it shows in ps and shell history)
  -o table|json      output: human tables (default) or the API's JSON
`

// cmd is one invocation: its flags and the client they make.
type cmd struct {
	env  Env
	fs   *flag.FlagSet
	args []string // positional arguments

	server, token, tokenFile, output *string
	client                           *Client
}

func newCmd(name string, env Env) *cmd {
	fs := flag.NewFlagSet("rampart control "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	c := &cmd{env: env, fs: fs}
	c.server = fs.String("server", "", "control plane URL (default $"+EnvServer+", else "+DefaultServer+")")
	c.token = fs.String("token", "", "API token (discouraged: visible in ps and history; prefer -token-file or $"+EnvToken+")")
	c.tokenFile = fs.String("token-file", "", "file holding the API token (default: $"+EnvToken+")")
	c.output = fs.String("o", "table", "output: table or json")
	return c
}

// parse reads flags wherever they are among the positional arguments.
func (c *cmd) parse(args []string) error {
	for {
		if err := c.fs.Parse(args); err != nil {
			return err
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			break
		}
		c.args = append(c.args, rest[0])
		args = rest[1:]
	}
	if o := *c.output; o != "table" && o != "json" {
		return fmt.Errorf("-o %q: want table or json", o)
	}
	server := *c.server
	if server == "" {
		server = c.env.Getenv(EnvServer)
	}
	if server == "" {
		server = DefaultServer
	}
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		return fmt.Errorf("-server %q: want http://HOST:PORT or https://HOST:PORT", server)
	}
	tok, err := c.resolveToken()
	if err != nil {
		return err
	}
	c.client = &Client{Server: server, Token: tok}
	return nil
}

func (c *cmd) resolveToken() (string, error) {
	switch {
	case *c.token != "" && *c.tokenFile != "":
		return "", errors.New("give -token or -token-file, not both")
	case *c.token != "":
		return *c.token, nil
	case *c.tokenFile != "":
		data, err := os.ReadFile(*c.tokenFile)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty", *c.tokenFile)
		}
		return tok, nil
	}
	if tok := strings.TrimSpace(c.env.Getenv(EnvToken)); tok != "" {
		return tok, nil
	}
	return "", fmt.Errorf("no API token: give -token-file FILE or set $%s", EnvToken)
}

// want checks the number of positional arguments.
func (c *cmd) want(min, max int, usage string) error {
	if n := len(c.args); n < min || n > max {
		return fmt.Errorf("usage: %s %s", c.fs.Name(), usage)
	}
	return nil
}

func (c *cmd) json() bool { return *c.output == "json" }

// Main runs a client subcommand: args[0] is its name. -h prints the
// subcommand's flags and the command list, and is not an error.
func Main(args []string, env Env) error {
	if env.Stderr == nil {
		env.Stderr = os.Stderr
	}
	err := dispatch(args, env)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(env.Stderr, "\n"+Usage)
		return nil
	}
	return err
}

func dispatch(args []string, env Env) error {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.Stdin == nil {
		env.Stdin = os.Stdin
	}
	if env.Stdout == nil {
		env.Stdout = os.Stdout
	}
	if len(args) == 0 || !IsCommand(args[0]) {
		fmt.Fprint(env.Stderr, Usage)
		return fmt.Errorf("want a subcommand: %s", strings.Join(Commands, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name, rest := args[0], args[1:]
	switch name {
	case "submit":
		return submit(ctx, newCmd(name, env), rest)
	case "diff":
		return diff(ctx, newCmd(name, env), rest)
	case "rollout":
		return rollout(ctx, env, rest)
	case "revisions":
		return revisions(ctx, newCmd(name, env), rest)
	case "fleet":
		return fleet(ctx, newCmd(name, env), rest)
	case "deny":
		return denyCmd(ctx, env, rest)
	case "purge":
		return purgeCmd(ctx, env, rest)
	case "regions":
		return regions(ctx, newCmd(name, env), rest)
	case "drain-region":
		return drainRegion(ctx, newCmd(name, env), rest)
	case "undrain-region":
		return undrainRegion(ctx, newCmd(name, env), rest)
	case "platforms":
		return platforms(ctx, newCmd(name, env), rest)
	case "writer":
		return writerCmd(ctx, env, rest)
	default:
		return nodes(ctx, env, rest)
	}
}

// sub splits "rollout status ..." style commands: the verb must be one
// of verbs.
func sub(group string, args []string, verbs ...string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("usage: rampart control %s %s", group, strings.Join(verbs, "|"))
	}
	for _, v := range verbs {
		if args[0] == v {
			return v, args[1:], nil
		}
	}
	return "", nil, fmt.Errorf("rampart control %s: unknown %q (want %s)", group, args[0], strings.Join(verbs, ", "))
}
