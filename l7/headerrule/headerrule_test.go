package headerrule

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestApply(t *testing.T) {
	r, err := Compile(&snapshot.HeaderRules{
		Request: snapshot.HeaderOps{
			Remove: []string{"cookie", "X-Debug"},
			Set:    map[string]string{"x-api-version": "2"},
			Add:    map[string]string{"Via": "rampart"},
		},
		Response: snapshot.HeaderOps{Set: map[string]string{"Cache-Control": " no-store "}, Remove: []string{"Server"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Cookie": {"a=1"}, "X-Debug": {"1"}, "X-Api-Version": {"1", "0"}, "Via": {"1.1 edge"}}
	r.ApplyRequest(h)
	if _, ok := h["Cookie"]; ok || h.Get("X-Debug") != "" {
		t.Errorf("remove failed: %v", h)
	}
	if got := h["X-Api-Version"]; len(got) != 1 || got[0] != "2" {
		t.Errorf("set: %q", got)
	}
	if got := h["Via"]; len(got) != 2 || got[1] != "rampart" {
		t.Errorf("add: %q", got)
	}
	resp := http.Header{"Server": {"x"}}
	r.ApplyResponse(resp)
	if resp.Get("Server") != "" || resp.Get("Cache-Control") != "no-store" {
		t.Errorf("response: %v", resp)
	}
	// A value added by one request is never seen by another.
	h2 := http.Header{"Via": {"a"}}
	r.ApplyRequest(h2)
	h2["Via"][1] = "changed"
	h3 := http.Header{}
	r.ApplyRequest(h3)
	if h3.Get("Via") != "rampart" || h3.Get("X-Api-Version") != "2" {
		t.Errorf("shared value was modified: %v", h3)
	}
}

func TestCompileRefuses(t *testing.T) {
	for name, rules := range map[string]snapshot.HeaderRules{
		"bad name":       {Request: snapshot.HeaderOps{Set: map[string]string{"Bad Name": "x"}}},
		"hop-by-hop":     {Request: snapshot.HeaderOps{Add: map[string]string{"Transfer-Encoding": "chunked"}}},
		"host":           {Request: snapshot.HeaderOps{Set: map[string]string{"host": "evil"}}},
		"CRLF in value":  {Response: snapshot.HeaderOps{Set: map[string]string{"X-A": "a\r\nInjected: 1"}}},
		"NUL in value":   {Response: snapshot.HeaderOps{Add: map[string]string{"X-A": "a\x00"}}},
		"empty name":     {Request: snapshot.HeaderOps{Remove: []string{""}}},
		"remove framing": {Response: snapshot.HeaderOps{Remove: []string{"Content-Length"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Compile(&rules); err == nil {
				t.Fatal("compiled")
			}
		})
	}
	if r, err := Compile(nil); r != nil || err != nil {
		t.Fatal("nil rules")
	}
	var nilRules *Rules
	nilRules.ApplyRequest(http.Header{}) // no-op, no panic
}

func TestApplyAllocsOnlyForAdds(t *testing.T) {
	r, _ := Compile(&snapshot.HeaderRules{Request: snapshot.HeaderOps{Remove: []string{"A"}, Set: map[string]string{"B": "1"}}})
	h := http.Header{"A": {"x"}, "B": {"y"}}
	if n := testing.AllocsPerRun(100, func() { h["A"] = h["B"]; r.ApplyRequest(h) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}

func FuzzApply(f *testing.F) {
	f.Add("X-A", "v", "x-a", "w", "X-B")
	f.Add("via", "rampart", "Via", "1.1 edge", "cookie")
	f.Fuzz(func(t *testing.T, setName, setValue, hdrName, hdrValue, removeName string) {
		r, err := Compile(&snapshot.HeaderRules{Request: snapshot.HeaderOps{
			Set:    map[string]string{setName: setValue},
			Remove: []string{removeName},
			Add:    map[string]string{setName + "-Add": setValue},
		}})
		if err != nil {
			return
		}
		h := http.Header{}
		if checkName(hdrName) == nil && checkValue(hdrValue) == nil {
			h.Add(hdrName, hdrValue)
		}
		r.ApplyRequest(h)
		set := http.CanonicalHeaderKey(setName)
		if got := h[set]; len(got) != 1 || got[0] != strings.TrimSpace(setValue) {
			t.Fatalf("set %q: got %q", set, got)
		}
		if rm := http.CanonicalHeaderKey(removeName); rm != set && rm != http.CanonicalHeaderKey(setName+"-Add") {
			if _, ok := h[rm]; ok {
				t.Fatalf("%q not removed", rm)
			}
		}
		for k, vv := range h {
			if checkName(k) != nil && k != http.CanonicalHeaderKey(hdrName) {
				t.Fatalf("invalid name %q produced", k)
			}
			for _, v := range vv {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("unsafe value %q", v)
				}
			}
		}
	})
}
