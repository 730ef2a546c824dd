package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const routeTestdata = "../../l7/routecheck/testdata/"

// rampart route check: 0 when every case passes (fixture and signed state),
// 1 on a mismatch, 2 on bad input naming the case.
func TestRouteCheckExitCodes(t *testing.T) {
	cfg, cases := routeTestdata+"config.yaml", routeTestdata+"cases.yaml"
	out, code := run(t, "route", "check", "-config", cfg, "-region-state", routeTestdata+"state.yaml", "-cases", cases)
	if code != 0 || !strings.Contains(out, "15 cases, 15 passed, 0 failed") {
		t.Errorf("fixture state: exit %d, want 0:\n%s", code, out)
	}

	dir := t.TempDir()
	if out, code := run(t, "keygen", "-out", filepath.Join(dir, "rs")); code != 0 {
		t.Fatalf("keygen: exit %d\n%s", code, out)
	}
	signed := filepath.Join(dir, "state.json")
	if out, code := run(t, "regionstate", "build", "-in", routeTestdata+"state.yaml", "-key", filepath.Join(dir, "rs.key"),
		"-epoch", "1", "-sequence", "2", "-out", signed); code != 0 {
		t.Fatalf("regionstate build: exit %d\n%s", code, out)
	}
	out, code = run(t, "route", "check", "-config", cfg, "-region-state", signed, "-key", filepath.Join(dir, "rs.pub"), "-cases", cases)
	if code != 0 || !strings.Contains(out, "15 cases, 15 passed, 0 failed") {
		t.Errorf("signed state: exit %d, want 0:\n%s", code, out)
	}
	if out, code := run(t, "route", "check", "-config", cfg, "-region-state", signed, "-cases", cases); code != 2 || !strings.Contains(out, "-key") {
		t.Errorf("signed state without -key: exit %d, want 2 asking for -key:\n%s", code, out)
	}

	out, code = run(t, "route", "check", "-config", cfg, "-region-state", routeTestdata+"state.yaml", "-cases", routeTestdata+"cases-mismatch.yaml")
	if code != 1 || !strings.Contains(out, "FAIL: route status, want get-account") || !strings.Contains(out, "2 of 3 cases do not match") {
		t.Errorf("mismatch: exit %d, want 1 with the FAIL lines:\n%s", code, out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("cases:\n  - {name: first, host: h, path: /, expect: {route: r}}\n  - {name: broken, host: h, path: nope, expect: {route: r}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, "route", "check", "-config", cfg, "-cases", bad); code != 2 || !strings.Contains(out, `case "broken"`) {
		t.Errorf("bad cases: exit %d, want 2 naming case \"broken\":\n%s", code, out)
	}
	if out, code := run(t, "route", "check", "-config", routeTestdata+"state.yaml", "-cases", cases); code != 2 {
		t.Errorf("a config that is not a config: exit %d, want 2:\n%s", code, out)
	}
}
