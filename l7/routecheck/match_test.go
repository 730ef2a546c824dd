package routecheck

import "testing"

// Cases with header fields and queries reach the routes' matchers.
func TestMatchCasesPass(t *testing.T) {
	s, err := LoadState("state.yaml", read(t, "state.yaml"), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	out, failed := check(t, "cases-match.yaml", s)
	if failed != 0 {
		t.Errorf("%d cases failed:\n%s", failed, out)
	}
	golden(t, "cases-match.golden", out)
}
