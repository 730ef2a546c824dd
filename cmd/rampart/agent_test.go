package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentRejectsTrailingArguments: "teardown" (or anything) after the
// flags is refused with the usage and a non-zero exit, and nothing runs:
// no state directory is created, no pins are touched.
func TestAgentRejectsTrailingArguments(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	pins := filepath.Join(dir, "pins")
	for _, args := range [][]string{
		{"agent", "-state-dir", state, "-pin-root", pins, "teardown"},
		{"agent", "-interfaces", "lo", "-state-dir", state, "-pin-root", pins, "extra", "-keep-vips"},
		{"agent", "teardown", "-state-dir", state, "-pin-root", pins, "now"},
	} {
		out, code := run(t, args...)
		if code == 0 {
			t.Errorf("%q: exit 0, want non-zero; output:\n%s", args, out)
		}
		if !strings.Contains(out, "unexpected arguments") || !strings.Contains(out, "-interfaces") {
			t.Errorf("%q: output lacks the complaint or the usage:\n%s", args, out)
		}
		if strings.Contains(out, "detached and unpinned") || strings.Contains(out, "agent started") {
			t.Errorf("%q: something ran:\n%s", args, out)
		}
		for _, p := range []string{state, pins} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%q: %s exists (err %v): the agent ran", args, p, err)
			}
		}
	}
}
