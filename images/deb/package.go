package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

// options say what to package and where to.
type options struct {
	Root    string // repository root
	Binary  string // the rampart binary
	Version string // Debian version
	Arch    string // Debian architecture
	OutDir  string
	// MTime is every file's modification time (zero: the binary's), so two
	// builds of one commit give the same package.
	MTime time.Time
}

// debVersion is what dpkg accepts as an upstream version without an epoch
// or revision: a digit first, then alphanumerics and . + ~.
var debVersion = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

// Files of the package and where they come from, relative to the
// repository root. Units are added by glob (images/systemd/*.service).
//
// The package has no dpkg conffiles: its defaults live under /usr/lib and are
// replaced on every upgrade, and the files an operator (or first boot) edits
// under /etc are made by postinst from the templates in /usr/lib/rampart/defaults
// only when missing. So an upgrade never stops at a conffile prompt, even
// non-interactively, and never touches what the operator wrote; purge removes
// those files (postrm).
var packaged = []struct {
	src, dst string
	mode     os.FileMode
}{
	{"images/etc/defaults/agent.env", "/usr/lib/rampart/defaults/agent.env", 0o644},
	{"images/etc/defaults/proxy.env", "/usr/lib/rampart/defaults/proxy.env", 0o644},
	{"images/etc/defaults/control.env", "/usr/lib/rampart/defaults/control.env", 0o644},
	{"images/etc/defaults/proxy-limits.conf", "/usr/lib/rampart/defaults/proxy-limits.conf", 0o644},
	{"images/etc/sysctl.d/60-rampart.conf", "/usr/lib/sysctl.d/60-rampart.conf", 0o644},
	{"images/etc/tmpfiles.d/rampart.conf", "/usr/lib/tmpfiles.d/rampart.conf", 0o644},
	{"images/etc/examples/edge.yaml", "/usr/share/doc/rampart/examples/edge.yaml", 0o644},
	{"images/etc/examples/control.yaml", "/usr/share/doc/rampart/examples/control.yaml", 0o644},
	{"README.md", "/usr/share/doc/rampart/README.md", 0o644},
}

// units lists the unit files of images/systemd/ (the image helper's
// first-boot unit included), sorted.
func units(root string) ([]string, error) {
	var out []string
	for _, pattern := range []string{"*.service", "*.timer", "*.socket"} {
		m, err := filepath.Glob(filepath.Join(root, "images", "systemd", pattern))
		if err != nil {
			return nil, fmt.Errorf("list units %s: %w", pattern, err)
		}
		out = append(out, m...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no unit files in %s", filepath.Join(root, "images", "systemd"))
	}
	sort.Strings(out)
	return out, nil
}

// info describes the package; scriptDir holds the rendered maintainer
// scripts.
func info(o options, scriptDir string) (*nfpm.Info, error) {
	if o.Binary == "" {
		return nil, errors.New("no binary given (-binary)")
	}
	if !debVersion.MatchString(o.Version) {
		return nil, fmt.Errorf("version %q is not a Debian upstream version (digit first, then [A-Za-z0-9.+~])", o.Version)
	}
	st, err := os.Stat(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	mtime := o.MTime
	if mtime.IsZero() {
		mtime = st.ModTime().UTC().Truncate(time.Second)
	}
	owned := func(mode os.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: mtime}
	}
	contents := files.Contents{{Source: o.Binary, Destination: "/usr/bin/rampart", FileInfo: owned(0o755)}}
	for _, p := range packaged {
		contents = append(contents, &files.Content{Source: filepath.Join(o.Root, p.src), Destination: p.dst, FileInfo: owned(p.mode)})
	}
	unitFiles, err := units(o.Root)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, u := range unitFiles {
		names = append(names, filepath.Base(u))
		contents = append(contents, &files.Content{Source: u, Destination: "/usr/lib/systemd/system/" + filepath.Base(u), FileInfo: owned(0o644)})
	}
	scripts := map[string]string{}
	for _, name := range []string{"postinst", "prerm", "postrm"} {
		body, err := os.ReadFile(filepath.Join(o.Root, "images", "deb", "scripts", name))
		if err != nil {
			return nil, fmt.Errorf("maintainer script: %w", err)
		}
		text := strings.ReplaceAll(string(body), "@UNITS@", strings.Join(names, " "))
		path := filepath.Join(scriptDir, name)
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		scripts[name] = path
	}
	return &nfpm.Info{
		Name:          "rampart",
		Arch:          o.Arch,
		Platform:      "linux",
		Version:       o.Version,
		VersionSchema: "none",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "rampart maintainers <rampart@example.org>",
		Description: "eBPF-assisted L4/L7 edge appliance\n" +
			"One binary: the node agent (XDP filter, sk_lookup steering, VIPs, anycast),\n" +
			"the L7 proxy and the control plane, with hardened systemd units.",
		Homepage: "https://github.com/rampart-edge/rampart",
		License:  "Apache-2.0",
		MTime:    mtime,
		Overridables: nfpm.Overridables{
			// systemd ≥ 247 knows every directive the units use (ProtectProc=, ProcSubset=).
			Depends:  []string{"systemd (>= 247)", "passwd"},
			Contents: contents,
			Umask:    0o022,
			Scripts:  nfpm.Scripts{PostInstall: scripts["postinst"], PreRemove: scripts["prerm"], PostRemove: scripts["postrm"]},
			Deb:      nfpm.Deb{Compression: "gzip"},
		},
	}, nil
}

// build writes the package into o.OutDir and returns its path and size.
func build(o options) (string, int64, error) {
	scriptDir, err := os.MkdirTemp("", "rampart-deb-scripts-")
	if err != nil {
		return "", 0, fmt.Errorf("scripts dir: %w", err)
	}
	defer os.RemoveAll(scriptDir)
	in, err := info(o, scriptDir)
	if err != nil {
		return "", 0, err
	}
	in = nfpm.WithDefaults(in)
	if err := nfpm.PrepareForPackager(in, "deb"); err != nil {
		return "", 0, fmt.Errorf("prepare package: %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return "", 0, fmt.Errorf("output dir: %w", err)
	}
	path := filepath.Join(o.OutDir, deb.Default.ConventionalFileName(in))
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", 0, fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := deb.Default.Package(in, f); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", 0, fmt.Errorf("package %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", 0, fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", 0, fmt.Errorf("rename %s: %w", tmp, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return path, st.Size(), nil
}
