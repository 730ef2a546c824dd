package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/pgtest"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// The operator page in a real browser (Debian's chromium driven with
// chromedp) against a real control plane on PostgreSQL and three real node
// clients in two regions. Every assertion is on the page's DOM.
//
//	go test -count=1 -run TestDashboardInBrowser -v ./control/server
//
// RAMPART_SCREENSHOTS names a directory for the screenshots of each state
// (default: the test's temp dir).

// chromium finds the browser: skipped without it unless CI is set.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is required in CI (hack/deps.sh test installs the Debian package chromium)")
	}
	t.Skip("chromium not found (install the Debian package chromium: hack/deps.sh test)")
	return ""
}

// browser starts a headless chromium with a fresh profile and a window of
// width×height; the returned context is its first tab.
func browser(t *testing.T, width, height int) (alloc, tab context.Context) {
	t.Helper()
	path := chromium(t)
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(profile), chromedp.WindowSize(width, height))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelTab(); cancelAlloc() }) // before profile's removal: cleanups run last first
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return alloc, tab
}

// do runs browser actions, failing the test on an error.
func do(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// js evaluates a script in the page and decodes its result.
func js[T any](t *testing.T, tab context.Context, script string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script))
	if err != nil {
		t.Fatalf("evaluate %s: %v", script, err)
	}
	return v
}

// waitDOM polls a boolean script until it holds (30 s at most); on a
// timeout it shows what the page said.
func waitDOM(t *testing.T, tab context.Context, what, script string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](script))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			text, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("the page never showed %s within 30 s (last error %v); the page said:\n%s", what, err, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshot saves the viewport as <dir>/<name>.png.
func screenshot(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %d bytes", p, len(png))
}

// show scrolls the element into view (top of the viewport).
func show(t *testing.T, tab context.Context, selector string) {
	t.Helper()
	js[bool](t, tab, fmt.Sprintf(`(document.querySelector(%q).scrollIntoView({block: "start"}), true)`, selector))
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// noOverflow says the page does not scroll sideways.
const noOverflow = `document.scrollingElement.scrollWidth <= window.innerWidth`

// fakeAgent stands in for a node's anycast agent: its /anycast/status
// (anycast.Status as JSON) with one VIP, 203.0.113.0/24, whose state the
// test sets.
type fakeAgent struct {
	url string
	mu  sync.Mutex
	doc []byte
}

func newFakeAgent(t *testing.T) *fakeAgent {
	a := &fakeAgent{}
	a.set("announced", "", "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/anycast/status" {
			http.NotFound(w, r)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		_, _ = w.Write(a.doc)
	}))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

func (a *fakeAgent) set(state, reason, drained string) {
	doc, _ := json.Marshal(map[string]any{"min_sites": 1, "guard_source": "the region-state document",
		"vips": []map[string]any{{"prefix": "203.0.113.0/24", "state": state, "reason": reason, "drained": drained,
			"since": "2026-12-03T12:00:00Z", "guard": map[string]any{"active": false, "last": "2 other sites announce it", "other_sites": []string{"a", "b"}}}}})
	a.mu.Lock()
	a.doc = doc
	a.mu.Unlock()
}

func TestDashboardInBrowser(t *testing.T) {
	chromium(t)
	shots := os.Getenv("RAMPART_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	tu := fast
	tu.bake = 1500 * time.Millisecond // long enough to see each stage bake on the page
	cfg := backend{name: "postgres", dsn: pgtest.DSN(t)}.config(t, tu)
	// The canary bakes longer: a stage passes at the end of its bake even
	// without data, so the bad canary's reports (50 ms apart) must reach
	// the gate before it ends, however busy the machine.
	canaryBake := config.Duration(6 * time.Second)
	cfg.Rollout.Stages[0].Bake = &canaryBake
	in := start(t, cfg, "")
	in.waitLeader(t, 30*time.Second)
	nodes, agents := map[string]*node{}, map[string]*fakeAgent{}
	for _, id := range []model.Identity{
		{NodeID: "canary-1", Region: "eu", Zone: "eu-1a", Cohort: "canary"},
		{NodeID: "eu-b-1", Region: "eu", Zone: "eu-1b"},
		{NodeID: "us-1", Region: "us", Zone: "us-1a"},
	} {
		agents[id.NodeID] = newFakeAgent(t)
		n := &node{id: id, dir: t.TempDir(), report: 50 * time.Millisecond, poll: 20 * time.Millisecond, agent: agents[id.NodeID].url}
		n.startProxy(t)
		n.startClient(t, in.url)
		nodes[id.NodeID] = n
	}

	_, tab := browser(t, 1280, 900)
	do(t, tab, "open the page", chromedp.Navigate(in.url+"/ui/"))
	waitDOM(t, tab, "the sign-in form", `!document.getElementById("login").hidden && document.getElementById("app").hidden`)
	if !js[bool](t, tab, noOverflow) {
		t.Error("the sign-in page scrolls sideways at 1280 px")
	}

	// Sign in: type the token and press Enter.
	do(t, tab, "sign in", chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.KeyEvent("\r"))
	waitDOM(t, tab, "the admin signed in", `document.getElementById("app").hidden === false && document.getElementById("who").textContent.includes("token ops (role admin, may steer)")`)
	if js[bool](t, tab, `document.getElementById("token").value !== ""`) {
		t.Error("the token stays in the input after sign-in")
	}

	// Fleet: three nodes in two regions.
	waitDOM(t, tab, "three nodes in two regions", `document.querySelectorAll("#fleet-body tr[data-node]").length === 3 &&
		[...document.querySelectorAll("#fleet-body h3[data-region]")].map((h) => h.dataset.region).join(",") === "eu,us" &&
		document.getElementById("fleet-summary").textContent.startsWith("3 nodes in 2 regions")`)
	waitDOM(t, tab, "every node live", `[...document.querySelectorAll("#fleet-body tr[data-node]")].every((r) => r.textContent.includes("live"))`)
	waitDOM(t, tab, "versions as epoch.sequence", `[...document.querySelectorAll("#fleet-body tr[data-node] td:nth-child(5)")].every((td) => /^v\d+\.\d+ /.test(td.textContent))`)

	// Publish a revision and watch its stages pass one after another.
	r1 := in.submit(t, cfgYAML(2, 100))
	stagesOf := fmt.Sprintf(`[...document.querySelectorAll('article[data-rollout=%s] li[data-stage]')]`, quote(r1.ID))
	passed := stagesOf + `.filter((li) => li.querySelector(".badge").textContent === "passed").length`
	var seen []int
	shotMid := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := js[int](t, tab, passed)
		if len(seen) == 0 || seen[len(seen)-1] != n {
			seen = append(seen, n)
		}
		if n > 0 && !shotMid {
			show(t, tab, "#rollouts")
			screenshot(t, tab, shots, "rollout-stages")
			shotMid = true
		}
		if js[bool](t, tab, fmt.Sprintf(`(document.querySelector('article[data-rollout=%s] h3 .badge') || {}).textContent === "done"`, quote(r1.ID))) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout %s not done on the page within 60 s; passed stages seen %v", r1.ID, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.IsSorted(seen) || len(seen) < 3 {
		t.Errorf("passed stages seen on the page %v: want them to advance one stage at a time", seen)
	}
	if got := js[string](t, tab, stagesOf+`.map((li) => li.dataset.stage + ":" + li.querySelector(".badge").textContent).join(",")`); got != "canary:passed,zone:skipped,region:passed,all:passed" {
		t.Errorf("stages of %s on the page: %s (zone eu-1a has only the canary, so it is skipped)", r1.ID, got)
	}
	t.Logf("passed stages seen on the page while %s rolled out: %v", r1.ID, seen)
	waitDOM(t, tab, "every node converged on "+r1.ID, `[...document.querySelectorAll("#fleet-body tr[data-node]")].every((r) => r.textContent.includes("converged") && r.textContent.includes("ready"))`)
	show(t, tab, "body")
	screenshot(t, tab, shots, "fleet")

	// A bad canary: its error rate breaks the gate, the page shows the
	// rollback and why.
	r2 := in.submit(t, cfgYAML(3, 100))
	nodes["canary-1"].setErrRate(func(v snapshot.Version) float64 {
		if v == r2.Version {
			return 0.5
		}
		return 0
	})
	art := fmt.Sprintf(`document.querySelector('article[data-rollout=%s]')`, quote(r2.ID))
	waitDOM(t, tab, "the bad canary's rollback with its reason", fmt.Sprintf(`(() => { const a = %s; return !!a &&
		a.querySelector("h3 .badge").textContent === "failed" && a.querySelector("[data-reason]").textContent.includes("error rate") &&
		a.textContent.includes("Rolled back to ") && a.querySelector('li[data-stage=canary] .badge').textContent === "failed"; })()`, art))
	show(t, tab, fmt.Sprintf(`article[data-rollout=%s]`, quote(r2.ID)))
	screenshot(t, tab, shots, "rollback")

	steerFromPage(t, in, tab, nodes, shots)

	// Add a deny entry in the page's form.
	do(t, tab, "fill the deny form", chromedp.SendKeys(chromedp.ID("deny-value"), "198.51.100.0/24"),
		chromedp.SendKeys(chromedp.ID("deny-reason"), "scanner seen in the browser test"), chromedp.Click(chromedp.CSS(`#deny-form button[type=submit]`)))
	waitDOM(t, tab, "the deny entry listed", `(() => { const r = document.querySelector('#deny-table tr[data-deny="cidr:198.51.100.0/24"]');
		return !!r && r.textContent.includes("scanner seen in the browser test"); })()`)
	show(t, tab, "#deny")
	screenshot(t, tab, shots, "deny")

	// Drain region us with its button; its site's agent then drains the
	// VIP (as the real agent does on the region-state document).
	vipState := func(node string) string {
		return fmt.Sprintf(`(document.querySelector('#anycast-table tr[data-node=%s][data-vip="203.0.113.0/24"]') || {dataset: {}}).dataset.state`, quote(node))
	}
	waitDOM(t, tab, "every site announcing the VIP", vipState("canary-1")+` === "announced" && `+vipState("eu-b-1")+` === "announced" && `+vipState("us-1")+` === "announced"`)
	do(t, tab, "drain us", chromedp.Click(chromedp.CSS(`#regions-table tr[data-region=us] button`)))
	waitDOM(t, tab, "region us draining", `(() => { const r = document.querySelector('#regions-table tr[data-region=us]');
		return !!r && !!r.querySelector(".badge.warn") && r.textContent.includes("draining") && r.textContent.includes("drained from the dashboard by ops") &&
		r.querySelector("button").textContent === "Undrain us"; })()`)
	waitDOM(t, tab, "the fleet's region us marked draining", `document.querySelector('#fleet-body h3[data-region=us]').textContent.includes("draining")`)
	agents["us-1"].set("draining", "region us drained", "region us: drained from the dashboard by ops")
	waitDOM(t, tab, "site us/us-1a's VIP draining with its reason", vipState("us-1")+` === "draining" &&
		document.querySelector('#anycast-table tr[data-node=us-1][data-vip="203.0.113.0/24"] .why').textContent.includes("region us drained · drained by region us: drained from the dashboard by ops") &&
		`+vipState("eu-b-1")+` === "announced"`)
	show(t, tab, "#regions")
	screenshot(t, tab, shots, "regions-draining")

	if got := js[string](t, tab, `(document.body.innerText.match(/.{0,40}(\[object |undefined|NaN).{0,40}/) || [""])[0]`); got != "" {
		t.Errorf("the page shows a value it failed to format: %q", got)
	}

	// Keyboard: Tab from the top reaches the nav links and buttons; Enter
	// follows a link and presses a button.
	// A reload starts focus at the top (the token in sessionStorage signs
	// the tab in again).
	do(t, tab, "reload", chromedp.Reload())
	waitDOM(t, tab, "signed in again after the reload", `document.getElementById("app").hidden === false &&
		!!document.querySelector('#regions-table tr[data-region=us] button')`)
	var reached []string
	for i := 0; i < 80; i++ {
		do(t, tab, "press Tab", chromedp.KeyEvent("\t"))
		reached = append(reached, js[string](t, tab, `(() => { const e = document.activeElement; return e.tagName.toLowerCase() + ":" + (e.getAttribute("href") || e.textContent.trim()); })()`))
		if reached[len(reached)-1] == "button:Undrain us" {
			break
		}
	}
	for _, want := range []string{"button:Sign out", "a:#fleet", "a:#deny", "button:Undrain us"} {
		if !slices.Contains(reached, want) {
			t.Errorf("Tab never reached %s; reached %v", want, reached)
		}
	}
	if reached[len(reached)-1] == "button:Undrain us" {
		do(t, tab, "press Enter on Undrain us", chromedp.KeyEvent("\r"))
		waitDOM(t, tab, "region us serving again after Enter", `(() => { const r = document.querySelector('#regions-table tr[data-region=us]');
			return !!r && r.textContent.includes("serving") && r.querySelector("button").textContent === "Drain us"; })()`)
		agents["us-1"].set("announced", "", "")
		waitDOM(t, tab, "site us/us-1a announcing again", vipState("us-1")+` === "announced"`)
	}
	js[bool](t, tab, `(document.querySelector('nav a[href="#deny"]').focus(), true)`)
	do(t, tab, "press Enter on the Deny list link", chromedp.KeyEvent("\r"))
	waitDOM(t, tab, "the #deny view after Enter on its link", `location.hash === "#deny"`)

	// Layout: no sideways scrolling at 1280 px and on a 390 px phone.
	if !js[bool](t, tab, noOverflow) {
		t.Errorf("the page scrolls sideways at 1280 px: %d > %d", js[int](t, tab, "document.scrollingElement.scrollWidth"), js[int](t, tab, "window.innerWidth"))
	}
	do(t, tab, "a 390 px viewport", chromedp.EmulateViewport(390, 844))
	waitDOM(t, tab, "the 390 px viewport", `window.innerWidth === 390`)
	if !js[bool](t, tab, noOverflow) {
		t.Errorf("the page scrolls sideways at 390 px: %d > %d", js[int](t, tab, "document.scrollingElement.scrollWidth"), js[int](t, tab, "window.innerWidth"))
	}
	js[bool](t, tab, `(window.scrollTo(0, 0), true)`)
	screenshot(t, tab, shots, "phone")
	do(t, tab, "back to 1280 px", chromedp.EmulateViewport(1280, 900))

	// The time from a node's report (its POST) to the page showing it. The
	// stream compares the state every 500 ms: each report goes out at a
	// different offset from the last change seen (0, 55, ... 495 ms), or
	// every sample would wait a whole interval.
	var samples []time.Duration
	for i := 0; i < 10; i++ {
		time.Sleep(time.Duration(i*55) * time.Millisecond)
		msg := fmt.Sprintf("probe report %d", i)
		body, _ := json.Marshal(model.Status{Identity: model.Identity{NodeID: "probe-1", Region: "eu", Zone: "eu-1b"}, Ready: true, LastError: msg})
		t0 := time.Now()
		if r := in.call(t, nodeToken, "POST", "/v1/node/status", "application/json", body, nil, nil); r.StatusCode != 204 {
			t.Fatalf("probe report: %d %s", r.StatusCode, bodyOf(r))
		}
		shown := fmt.Sprintf(`(document.querySelector('#fleet-body tr[data-node=probe-1]') || {textContent: ""}).textContent.includes(%s)`, quote(msg))
		for !js[bool](t, tab, shown) { // polled every 5 ms: the figure's resolution
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("the page never showed %q within 30 s", msg)
			}
			time.Sleep(5 * time.Millisecond)
		}
		samples = append(samples, time.Since(t0))
	}
	slices.Sort(samples)
	ms := make([]int64, len(samples))
	for i, s := range samples {
		ms[i] = s.Milliseconds()
	}
	t.Logf("FIGURE report to page: %d ms median, %d ms max (%d samples, ms: %v; reports sent 0-495 ms after the last change shown; events compared every 500 ms)", ms[len(ms)/2], ms[len(ms)-1], len(ms), ms)

	// A read token (in a tab of its own: sessionStorage is per tab) sees
	// the same views and no write buttons.
	rtab, cancel := chromedp.NewContext(tab)
	defer cancel()
	if err := chromedp.Do(rtab); err != nil { // the first call opens the tab: no timeout on it
		t.Fatalf("open a second tab: %v", err)
	}
	do(t, rtab, "open the page for the read token", chromedp.Navigate(in.url+"/ui/"),
		chromedp.SendKeys(chromedp.ID("token"), readToken), chromedp.KeyEvent("\r"))
	waitDOM(t, rtab, "the read token signed in with every view", `document.getElementById("who").textContent.includes("token viewer (role read, read-only)") &&
		document.querySelectorAll("#fleet-body tr[data-node]").length === 4 && document.querySelectorAll("#regions-table tr[data-region]").length === 2 &&
		document.querySelectorAll("#deny-table tr[data-deny]").length === 1 && document.querySelectorAll("article[data-rollout]").length >= 2`)
	if got := js[string](t, rtab, `[...document.querySelectorAll("button")].filter((b) => b.offsetParent !== null).map((b) => b.textContent).join(",")`); got != "Sign out" {
		t.Errorf("a read token sees the buttons %q, want only Sign out", got)
	}
	if !js[bool](t, rtab, `document.getElementById("deny-form").hidden && document.querySelectorAll(".write:not([hidden])").length === 0`) {
		t.Error("a read token sees the deny form")
	}
	screenshot(t, rtab, shots, "read-only")
}

// steerFromPage clicks a rollout's Pause, Resume and Abort buttons (the
// admin is signed in on tab): a paused revision stays at its stage while
// its nodes go on reporting, past the end its bake would have had;
// resumed, it goes on to done; another revision aborted from the page is
// shown aborted and rolled back with the reason. The page and the API
// must agree at every step.
func steerFromPage(t *testing.T, in *instance, tab context.Context, nodes map[string]*node, shots string) {
	t.Helper()
	const why = "from the dashboard by ops" // the reason the page sends
	var list struct {
		Bakes []float64 `json:"stage_bake_seconds"`
	}
	in.call(t, readToken, "GET", "/v1/rollouts", "", nil, nil, &list)

	// Pause while the canary bakes (6 s: the click lands well inside it).
	r := in.submit(t, cfgYAML(4, 100))
	art := fmt.Sprintf(`document.querySelector('article[data-rollout=%s]')`, quote(r.ID))
	sel := func(what string) string { return fmt.Sprintf(`article[data-rollout=%s] %s`, quote(r.ID), what) }
	waitDOM(t, tab, r.ID+"'s canary baking with a Pause button", fmt.Sprintf(`(() => { const a = %s; return !!a &&
		a.querySelector('li[data-stage=canary] .badge').textContent === "baking" && !!a.querySelector("button[data-action=pause]"); })()`, art))
	do(t, tab, "click Pause "+r.ID, chromedp.Click(chromedp.CSS(sel("button[data-action=pause]"))))
	waitDOM(t, tab, r.ID+" paused with the reason and a Resume button", fmt.Sprintf(`(() => { const a = %s;
		return [...a.querySelectorAll("h3 .badge")].map((b) => b.textContent).join(",") === "staging,paused" &&
		a.textContent.includes("Paused: %s") && !!a.querySelector("button[data-action=resume]") && !a.querySelector("button[data-action=pause]"); })()`, art, why))
	ro := in.rollout(t, r.ID)
	if !ro.Paused || ro.PauseReason != why || ro.State != model.StateStaging || ro.Phase != model.PhaseBaking {
		t.Fatalf("the API after Pause on the page: paused %v (%q), state %s, phase %s; want paused (%q), staging, baking",
			ro.Paused, ro.PauseReason, ro.State, ro.Phase, why)
	}
	stage, opened := ro.Stage, len(ro.Stages)

	// Paused, it stays: the canary reports 20 more times and the engine
	// judges the stage after its bake would have ended, and nothing moves.
	bakeEnd := ro.PhaseSince.Add(time.Duration(list.Bakes[stage] * float64(time.Second)))
	before := nodes["canary-1"].reports()
	eventually(t, 60*time.Second, "20 more reports and a health sample after the bake's end", func() bool {
		cur := in.rollout(t, r.ID)
		h := cur.Stages[len(cur.Stages)-1].Health
		return nodes["canary-1"].reports() >= before+20 && h != nil && h.At.After(bakeEnd)
	})
	ro = in.rollout(t, r.ID)
	if !ro.Paused || ro.State != model.StateStaging || ro.Stage != stage || ro.Phase != model.PhaseBaking || len(ro.Stages) != opened || ro.Stages[opened-1].Result != "" {
		t.Fatalf("a rollout paused on the page moved: state %s, stage %d (was %d), phase %s, %d stages opened (was %d), last result %q",
			ro.State, ro.Stage, stage, ro.Phase, len(ro.Stages), opened, ro.Stages[len(ro.Stages)-1].Result)
	}
	stageLi := fmt.Sprintf(`%s.querySelector('li[data-stage=%s]')`, art, quote(ro.Stages[opened-1].Name))
	waitDOM(t, tab, r.ID+" still paused at its stage, the bake shown held", fmt.Sprintf(`(() => { const li = %s; return %s.querySelectorAll("li[data-stage]").length === %d &&
		li.querySelector(".badge").textContent === "baking" && li.textContent.includes("bake paused: %g s again from resume"); })()`, stageLi, art, opened, list.Bakes[stage]))
	show(t, tab, fmt.Sprintf(`article[data-rollout=%s]`, quote(r.ID)))
	screenshot(t, tab, shots, "rollout-paused")

	// Resume: the bake starts again and the rollout goes on to done.
	do(t, tab, "click Resume "+r.ID, chromedp.Click(chromedp.CSS(sel("button[data-action=resume]"))))
	waitDOM(t, tab, r.ID+" resumed", fmt.Sprintf(`(() => { const a = %s; return !a.textContent.includes("Paused:") &&
		![...a.querySelectorAll("h3 .badge")].some((b) => b.textContent === "paused") && !a.querySelector("button[data-action=resume]"); })()`, art))
	// The bake left shown counts from the resume (the API's phase_since),
	// not from when the stage first went active.
	if left := js[string](t, tab, fmt.Sprintf(`((%s.textContent.match(/bake left (\d+) s/) || [])[1] || "")`, stageLi)); left != "" {
		cur := in.rollout(t, r.ID)
		want := list.Bakes[stage] - time.Since(cur.PhaseSince).Seconds()
		if n, err := strconv.Atoi(left); err == nil && cur.Stage == stage && float64(n) < want-1 {
			t.Errorf("after Resume the page shows %s s of bake left; the bake restarted at %s, so at least %.0f s are left", left, cur.PhaseSince, want-1)
		}
		t.Logf("after Resume the page showed %s s of bake left (the API: %.1f s)", left, want)
	}
	waitDOM(t, tab, r.ID+"'s paused stage passed after Resume", stageLi+`.querySelector(".badge").textContent === "passed"`)
	waitDOM(t, tab, r.ID+" done after Resume", art+`.querySelector("h3 .badge").textContent === "done" && !`+art+`.querySelector("button")`)
	if ro = in.rollout(t, r.ID); ro.State != model.StateDone || ro.Paused || ro.Stages[stage].Result != "passed" {
		t.Fatalf("the API after Resume on the page: state %s, paused %v, stage %s %q; want done, not paused, passed", ro.State, ro.Paused, ro.Stages[stage].Name, ro.Stages[stage].Result)
	}

	// Abort another revision mid-stage: shown aborted, rolled back, why.
	r = in.submit(t, cfgYAML(5, 100))
	art = fmt.Sprintf(`document.querySelector('article[data-rollout=%s]')`, quote(r.ID))
	waitDOM(t, tab, r.ID+"'s canary baking with an Abort button", fmt.Sprintf(`(() => { const a = %s; return !!a &&
		a.querySelector('li[data-stage=canary] .badge').textContent === "baking" && !!a.querySelector("button[data-action=abort]"); })()`, art))
	do(t, tab, "click Abort "+r.ID, chromedp.Click(chromedp.CSS(fmt.Sprintf(`article[data-rollout=%s] button[data-action=abort]`, quote(r.ID)))))
	waitDOM(t, tab, r.ID+" aborted and rolled back with the reason", fmt.Sprintf(`(() => { const a = %s;
		return a.querySelector("h3 .badge").textContent === "aborted" && a.querySelector("[data-reason]").textContent === "Reason: %s" &&
		/Rolled back to \S+/.test(a.textContent) && !a.querySelector("button"); })()`, art, why))
	ro = in.rollout(t, r.ID)
	if ro.State != model.StateAborted || ro.Reason != why || ro.RolledBackTo == "" {
		t.Fatalf("the API after Abort on the page: state %s, reason %q, rolled back to %q; want aborted, %q, a rollback revision", ro.State, ro.Reason, ro.RolledBackTo, why)
	}
	if got := js[string](t, tab, "[..."+art+`.querySelectorAll("p")].find((p) => p.textContent.startsWith("Rolled back to ")).textContent.slice(15)`); got != ro.RolledBackTo {
		t.Errorf("the page says %s was rolled back to %s; the API says %s", r.ID, got, ro.RolledBackTo)
	}
	var rb model.Revision
	in.call(t, readToken, "GET", "/v1/revisions/"+ro.RolledBackTo, "", nil, nil, &rb)
	waitDOM(t, tab, "every node converged on the rollback "+ro.RolledBackTo, fmt.Sprintf(`[...document.querySelectorAll("#fleet-body tr[data-node]")].every((r) =>
		r.textContent.includes("converged") && r.querySelector("td:nth-child(5)").textContent.startsWith("v%s "))`, rb.Version))
	show(t, tab, fmt.Sprintf(`article[data-rollout=%s]`, quote(r.ID)))
	screenshot(t, tab, shots, "aborted")
}

// reports counts the node's reports so far (each serves 40 requests).
func (n *node) reports() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reqs / 40
}
