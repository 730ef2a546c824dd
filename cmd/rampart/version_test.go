package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestPrintVersion(t *testing.T) {
	oldV, oldC := version, commit
	t.Cleanup(func() { version, commit = oldV, oldC })
	cases := []struct {
		name         string
		ver, com     string
		info         *debug.BuildInfo
		wantV, wantC string
	}{
		{"link-time values", "1.2.3", "abc123", nil, "1.2.3", "abc123"},
		{"nothing recorded", "", "", nil, "unknown", "unknown"},
		{"devel build info", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "unknown", "unknown"},
		{"build info fallback", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feedbeef"}}}, "v0.4.0", "feedbeef"},
		{"link-time wins", "2.0.0", "c0ffee", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feedbeef"}}}, "2.0.0", "c0ffee"},
	}
	for _, c := range cases {
		version, commit = c.ver, c.com
		var b bytes.Buffer
		printVersion(&b, c.info)
		want := "version: " + c.wantV + "\ncommit:  " + c.wantC + "\ngo:      " + runtime.Version() + "\n"
		if b.String() != want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, b.String(), want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	out, code := run(t, "version")
	if code != 0 || !strings.Contains(out, "go:      "+runtime.Version()) {
		t.Fatalf("rampart version: exit %d, output %q", code, out)
	}
	if out, code := run(t, "version", "extra"); code != 1 || !strings.Contains(out, "unexpected arguments") {
		t.Fatalf("rampart version extra: exit %d, output %q (want exit 1 naming the arguments)", code, out)
	}
}
