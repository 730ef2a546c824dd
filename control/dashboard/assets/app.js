// rampart control dashboard: reads the /v1 API with the token the operator
// types (sessionStorage, Authorization header only) and re-reads what
// GET /v1/events says changed. DOM built with textContent only.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const KEY = "rampart.token";
  let me = null, stream = null, gen = 0;
  const state = { fleet: null, rollouts: null, regions: null, platforms: null, deny: null, diffs: {} };

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  const badge = (cls, text) => el("span", { class: "badge " + cls }, text);
  function table(caption, head, rows, id) {
    return el("div", { class: "scroll" }, el("table", { id },
      caption ? el("caption", {}, caption) : null,
      el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)));
  }
  const ago = (s) => s < 90 ? Math.round(s) + " s ago" : s < 5400 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
  const pct = (x) => (100 * (x || 0)).toFixed(2) + " %";
  // Versions (snapshot and document) are {"epoch":E,"sequence":S}: shown as E.S.
  const ver = (v) => v && typeof v === "object" ? v.epoch + "." + v.sequence : String(v);
  const when = (t) => t && !t.startsWith("0001") ? new Date(t).toISOString().replace(".000", "") : "—";

  async function api(method, path, body, ctype) {
    const h = { Authorization: "Bearer " + sessionStorage.getItem(KEY) };
    if (body !== undefined) h["Content-Type"] = ctype || "application/json";
    const r = await fetch(path, { method, headers: h, body, cache: "no-store" });
    const text = await r.text();
    let j = null;
    try { j = text ? JSON.parse(text) : null; } catch (e) { j = null; }
    if (!r.ok) {
      const err = new Error(method + " " + path + ": " + r.status + " " + ((j && j.error) || text.trim()));
      err.status = r.status;
      throw err;
    }
    return j;
  }
  function showError(e) { $("error").textContent = e ? e.message : ""; if (e && e.status === 401) logout("token refused: " + e.message); }

  async function login(tok) {
    sessionStorage.setItem(KEY, tok);
    try {
      me = await api("GET", "/v1/whoami");
    } catch (e) {
      sessionStorage.removeItem(KEY);
      $("login-error").textContent = "Sign-in failed: " + e.message;
      return;
    }
    $("login-error").textContent = "";
    $("login").hidden = true; $("app").hidden = false; $("logout").hidden = false;
    $("who").textContent = "token " + me.name + " (role " + me.role + (me.write ? ", may steer" : ", read-only") + ")";
    document.body.classList.toggle("can-write", me.write);
    for (const f of document.querySelectorAll(".write")) f.hidden = !me.write;
    await reload(["fleet", "rollouts", "regions", "deny"]);
    listen();
  }
  function logout(msg) {
    sessionStorage.removeItem(KEY); me = null; gen++;
    if (stream) { stream.abort(); stream = null; }
    $("login").hidden = false; $("app").hidden = true; $("logout").hidden = true; $("who").textContent = "";
    $("status").textContent = msg || "signed out";
  }

  async function reload(kinds) {
    try {
      const jobs = [];
      if (kinds.includes("fleet")) jobs.push(api("GET", "/v1/fleet").then((j) => { state.fleet = j; }));
      if (kinds.includes("rollouts")) jobs.push(api("GET", "/v1/rollouts?limit=10").then((j) => { state.rollouts = j; }));
      if (kinds.includes("regions")) {
        jobs.push(api("GET", "/v1/regions").then((j) => { state.regions = j; }));
        jobs.push(api("GET", "/v1/platforms").then((j) => { state.platforms = j; }));
      }
      if (kinds.includes("deny")) jobs.push(api("GET", "/v1/deny").then((j) => { state.deny = j; }));
      await Promise.all(jobs);
      if (kinds.includes("rollouts")) await loadDiffs();
      showError(null);
    } catch (e) { showError(e); }
    render();
  }
  async function loadDiffs() {
    for (const ro of (state.rollouts.rollouts || []).slice(0, 3)) {
      if (!ro.baseline || state.diffs[ro.revision]) continue;
      try {
        state.diffs[ro.revision] = await api("GET", "/v1/diff?from=" + encodeURIComponent(ro.baseline) + "&to=" + encodeURIComponent(ro.revision));
      } catch (e) { state.diffs[ro.revision] = { error: e.message }; }
    }
  }

  // The live channel: a fetch stream (EventSource cannot send a header).
  async function listen() {
    const my = ++gen;
    while (my === gen && sessionStorage.getItem(KEY)) {
      const ctl = new AbortController(); stream = ctl;
      try {
        const r = await fetch("/v1/events", { headers: { Authorization: "Bearer " + sessionStorage.getItem(KEY) }, signal: ctl.signal, cache: "no-store" });
        if (r.status === 401) { logout("token refused by /v1/events"); return; }
        if (!r.ok || !r.body) throw new Error("/v1/events: " + r.status);
        $("status").textContent = "live";
        const rd = r.body.getReader(), dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await rd.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).join("\n");
            if (!data) continue;
            try { const ev = JSON.parse(data); await reload(ev.kinds || []); $("status").textContent = "live · change " + ev.seq; } catch (e) { showError(e); }
          }
        }
      } catch (e) {
        if (my !== gen) return;
      }
      $("status").textContent = "reconnecting…";
      await new Promise((res) => setTimeout(res, 1000));
    }
  }

  async function act(method, path, body, ctype) {
    try { await api(method, path, body, ctype); showError(null); } catch (e) { showError(e); }
  }

  function render() {
    if (state.fleet) renderFleet();
    if (state.rollouts) renderRollouts();
    if (state.regions) renderRegions();
    if (state.deny) renderDeny();
  }

  function renderFleet() {
    const f = state.fleet, nodes = f.nodes || [];
    const regions = new Map();
    for (const n of nodes) {
      const key = n.region || "(no region)";
      if (!regions.has(key)) regions.set(key, []);
      regions.get(key).push(n);
    }
    // /v1/regions is re-read on a regions change (a drain), /v1/fleet only on a fleet change: the newer wins.
    const health = new Map(((state.regions && state.regions.regions) || f.regions || []).map((r) => [r.name, r]));
    $("fleet-summary").textContent = nodes.length + " nodes in " + regions.size + " regions · stable " + (f.stable || "none") +
      " (v" + ver(f.stable_version) + ")" + (f.rolling ? " · rolling " + f.rolling : "") + " · leader " + ((f.leader && f.leader.holder) || "?");
    const out = [];
    for (const [name, ns] of [...regions.entries()].sort()) {
      const h = health.get(name);
      ns.sort((a, b) => (a.zone || "").localeCompare(b.zone || "") || a.node_id.localeCompare(b.node_id));
      const rows = ns.map((n) => el("tr", { "data-node": n.node_id },
        el("th", { scope: "row" }, n.node_id), el("td", {}, n.zone || "—"), el("td", {}, n.stage || "—"),
        el("td", {}, "v" + ver(n.assigned_version) + (n.assigned ? " (" + n.assigned + ")" : "")),
        el("td", {}, "v" + ver(n.active), " ", n.converged ? badge("ok", "converged") : badge("warn", "converging")),
        el("td", {}, n.ready ? badge("ok", "ready") : badge("bad", "not ready")),
        el("td", {}, ago(n.last_seen_seconds_ago), " ", n.live ? badge("ok", "live") : badge("bad", "lost")),
        el("td", {}, n.refused_reason ? [badge("bad", "refused v" + ver(n.refused_version)), " ", n.refused_reason] : n.last_error ? el("span", { class: "warn" }, n.last_error) : "—")));
      const hs = h ? [h.healthy ? badge("ok", "healthy") : badge("bad", "unhealthy"), " ", h.why || "", h.draining ? [" ", badge("warn", "draining")] : null] : ["health unknown"];
      out.push(el("h3", { "data-region": name }, "Region " + name + " · ", hs));
      out.push(table(null, ["Node", "Zone", "Stage", "Desired", "Active", "Readiness", "Last report", "Refusals"], rows, "fleet-" + name));
    }
    $("fleet-body").replaceChildren(...out);
    const ref = f.refused || [];
    $("fleet-refused").replaceChildren(ref.length ? table(null, ["Node", "Count", "Last reason"], ref.map((r) =>
      el("tr", {}, el("td", {}, r.id || "—"), el("td", {}, r.count), el("td", {}, r.reason + " (" + when(r.last_attempt) + ")")))) : el("p", { class: "mute" }, "none"));
  }

  function renderRollouts() {
    const ros = state.rollouts.rollouts || [];
    if (!ros.length) { $("rollouts-body").replaceChildren(el("p", { class: "mute" }, "no rollouts yet")); return; }
    const bakes = state.rollouts.stage_bake_seconds || [];
    const out = ros.map((ro) => {
      const open = ro.state === "staging" || ro.state === "pending";
      const stateCls = ro.state === "done" ? "ok" : ro.state === "failed" || ro.state === "rolled_back" || ro.state === "aborted" ? "bad" : "warn";
      const stages = (ro.stages || []).map((s, i) => {
        const h = s.health;
        const res = s.result ? badge(s.result === "passed" ? "ok" : s.result === "failed" ? "bad" : "mute", s.result) : (i === ro.stage && ro.state === "staging" ? badge("warn", (ro.phase || "open")) : badge("mute", "waiting"));
        return el("li", { "data-stage": s.name }, el("strong", {}, s.name), " ", res, " · cohort " + ((s.nodes || []).length ? (s.nodes.length === 1 ? "1 node: " : s.nodes.length + " nodes: ") + s.nodes.join(", ") : "no nodes"),
          h ? " · " + h.nodes + " on new version, error rate " + pct(h.error_rate) + " vs " + h.reference + " " + pct(h.reference_error_rate) +
            (h.latency_ms ? ", latency " + h.latency_ms.toFixed(1) + " ms vs " + h.reference_latency_ms.toFixed(1) + " ms" : "") + " → " + h.verdict + (h.explained ? " (" + h.explained + ")" : "") : "",
          s.active_at && !s.done_at && ro.state === "staging" ? (ro.paused ? " · bake paused: " + (bakes[i] || 0) + " s again from resume" :
            " · bake left " + Math.max(0, Math.round((bakes[i] || 0) - (Date.now() - Date.parse(ro.phase_since)) / 1000)) + " s of " + (bakes[i] || 0) + " s") : "");
      });
      const btn = (label, action) => el("button", { type: "button", class: "write", "data-action": action, onclick: () => {
        const reason = action === "resume" ? "" : "from the dashboard by " + me.name;
        act("POST", "/v1/rollouts/" + encodeURIComponent(ro.revision) + "/" + action, JSON.stringify({ reason }));
      } }, label + " " + ro.revision);
      const buttons = me && me.write && open ? el("p", {}, ro.paused ? btn("Resume", "resume") : btn("Pause", "pause"), btn("Abort", "abort")) : null;
      return el("article", { "data-rollout": ro.revision, class: "rollout" },
        el("h3", {}, "Revision " + ro.revision + " (v" + ver(ro.version) + ") ", badge(stateCls, ro.state), ro.paused ? [" ", badge("warn", "paused")] : null),
        el("p", {}, "baseline " + (ro.baseline || "none") + " · baseline error rate " + pct(ro.baseline_error_rate) + " · phase " + (ro.phase || "—") + " since " + when(ro.phase_since) +
          (ro.queued_behind ? " · queued behind " + ro.queued_behind : "")),
        ro.pause_reason ? el("p", { class: "warn" }, "Paused: " + ro.pause_reason) : null,
        ro.reason ? el("p", { class: stateCls, "data-reason": "" }, "Reason: " + ro.reason) : null,
        ro.rolled_back_to ? el("p", {}, "Rolled back to " + ro.rolled_back_to) : null,
        el("ol", { class: "stages" }, stages), buttons);
    });
    $("rollouts-body").replaceChildren(...out);
    renderDiffs(ros);
  }

  function renderDiffs(ros) {
    const out = [];
    for (const ro of ros.slice(0, 3)) {
      const d = state.diffs[ro.revision];
      const items = [];
      if (!d) items.push(el("p", { class: "mute" }, ro.baseline ? "loading…" : "first revision: nothing to compare"));
      else if (d.error) items.push(el("p", { class: "bad" }, d.error));
      else {
        const li = (label, xs) => xs && xs.length ? el("li", {}, label + ": " + xs.join(", ")) : null;
        items.push(el("ul", {}, li("routes added", d.routes_added), li("routes removed", d.routes_removed),
          (d.routes_changed || []).map((c) => el("li", {}, "route " + c.id + " changed: " + (c.fields || []).map((f) => f.field + " " + JSON.stringify(f.old) + " → " + JSON.stringify(f.new)).join("; "))),
          d.clusters ? [li("clusters added", d.clusters.added), li("clusters removed", d.clusters.removed), li("clusters changed", d.clusters.changed)] : null,
          li("other sections changed", d.sections_changed)));
        if (!items[items.length - 1].childElementCount) items[items.length - 1] = el("p", { class: "mute" }, "no changes: the same config");
      }
      const sh = ro.shadow;
      if (sh) {
        items.push(el("p", {}, "Shadow check: " + sh.requests + " requests, " + sh.differences + " differences, ", sh.unexpected ? badge("bad", sh.unexpected + " unexpected") : badge("ok", "none unexpected")));
        if ((sh.listed || []).length) items.push(table(null, ["Method", "Host", "Path", "Old", "New", "Explained"], sh.listed.map((x) =>
          el("tr", {}, el("td", {}, x.method), el("td", {}, x.host), el("td", {}, x.path), el("td", {}, x.old), el("td", {}, x.new), el("td", {}, x.expected ? "yes" : "no")))));
      }
      out.push(el("article", { "data-diff": ro.revision }, el("h3", {}, (ro.baseline || "—") + " → " + ro.revision), items));
    }
    $("diff-body").replaceChildren(...(out.length ? out : [el("p", { class: "mute" }, "no revisions")]));
  }

  function renderRegions() {
    const rs = state.regions.regions || [];
    const rows = rs.map((r) => el("tr", { "data-region": r.name },
      el("th", { scope: "row" }, r.name), el("td", {}, r.healthy ? badge("ok", "healthy") : badge("bad", "unhealthy"), " ", r.why || ""),
      el("td", {}, r.fresh + " fresh / " + r.ready + " ready of " + r.nodes),
      el("td", {}, r.draining ? [badge("warn", "draining"), " ", r.drain_reason || ""] : badge("ok", "serving")),
      el("td", {}, me && me.write ? el("button", { type: "button", class: "write", onclick: () => r.draining ?
        act("POST", "/v1/regions/" + encodeURIComponent(r.name) + "/undrain", "{}") :
        act("POST", "/v1/regions/" + encodeURIComponent(r.name) + "/drain", JSON.stringify({ reason: "drained from the dashboard by " + me.name })) },
      (r.draining ? "Undrain " : "Drain ") + r.name) : "—")));
    const doc = state.regions.document;
    $("regions-body").replaceChildren(table(doc ? "region-state document " + ver(doc.version) + " created " + when(doc.created) : "no region-state document on this instance",
      ["Region", "Health", "Nodes", "Drain", "Action"], rows, "regions-table"));
    const ps = (state.platforms && state.platforms.platforms) || [];
    const now = Date.now();
    $("platforms-body").replaceChildren(ps.length ? table(null, ["Platform", "Writer region", "Replica lags"], ps.map((p) => el("tr", { "data-platform": p.name },
      el("th", { scope: "row" }, p.name), el("td", {}, (p.writer || "none") + " (epoch " + p.writer_epoch + ")"),
      el("td", {}, (p.lags || []).map((l) => l.region + ": " + l.lag_ms + " ms, observed " + ago((now - Date.parse(l.observed_at)) / 1000)).join("; ") || "—")))) : el("p", { class: "mute" }, "no platforms configured"));
    // Anycast: what each node's agent reports it announces, grouped by site (region/zone).
    const nodes = (state.fleet && state.fleet.nodes) || [];
    const sites = new Map();
    for (const n of nodes) {
      const key = (n.region || "?") + "/" + (n.zone || "?");
      if (!sites.has(key)) sites.set(key, []);
      sites.get(key).push(n);
    }
    const draining = new Set(rs.filter((r) => r.draining).map((r) => r.name));
    const vipCls = { announced: "ok", draining: "warn", held: "warn", withdrawn: "bad" };
    const arows = [];
    for (const [site, ns] of [...sites.entries()].sort()) {
      for (const n of ns) {
        const g = n.guard;
        const guard = g ? "min sites " + g.min_sites + " · holding " + g.holding + (g.source ? " · counts from " + g.source : "") : "—";
        const row = (vip, st, why, gv) => el("tr", { "data-site": site, "data-node": n.node_id, "data-vip": vip || "", "data-state": st },
          el("th", { scope: "row" }, site), el("td", {}, n.node_id), el("td", {}, vip || "—"),
          el("td", {}, badge(vipCls[st] || "mute", st)), el("td", { class: "why" }, why), el("td", {}, gv));
        if (!n.agent_seen) { arows.push(row("", "no agent", "the node reports no anycast agent", "—")); continue; }
        const vips = n.vips || [];
        if (vips.length) {
          for (const v of vips) {
            const why = [v.reason, v.drained ? "drained by " + v.drained : "", v.since && !v.since.startsWith("0001") ? "since " + when(v.since) : ""].filter(Boolean).join(" · ");
            const gv = [v.guard_holding ? "holding · " : "", v.guard_verdict || "", " (" + v.other_sites + " other site" + (v.other_sites === 1 ? "" : "s") + ")", " · ", guard].join("");
            arows.push(row(v.prefix, v.state, why, gv));
          }
          continue;
        }
        // An agent that reports only what it announces (no per-VIP states).
        if ((n.announcing || []).length === 0) arows.push(row("", "withdrawn", draining.has(n.region) ? "region drained" : "agent announces nothing", guard));
        else for (const p of n.announcing) arows.push(row(p, draining.has(n.region) ? "draining" : "announced", draining.has(n.region) ? "region drained, still announced" : "", guard));
      }
    }
    $("anycast-body").replaceChildren(arows.length ? table(null, ["Site", "Node", "VIP", "State", "Reason", "Guard"], arows, "anycast-table") : el("p", { class: "mute" }, "no nodes"));
  }

  function renderDeny() {
    const d = state.deny, es = d.entries || [];
    const rows = es.map((e) => el("tr", { "data-deny": e.kind + ":" + e.value },
      el("td", {}, e.kind), el("th", { scope: "row" }, e.value), el("td", {}, when(e.expires_at)), el("td", {}, e.reason || "—"),
      el("td", {}, me && me.write ? el("button", { type: "button", class: "write", onclick: () => act("POST", "/v1/deny/expire", JSON.stringify({ kind: e.kind, value: e.value })) }, "Remove " + e.value) : "—")));
    $("deny-body").replaceChildren(el("p", {}, "sequence " + d.sequence + " · updated " + when(d.updated_at)),
      es.length ? table(null, ["Kind", "Value", "Expires", "Reason", "Action"], rows, "deny-table") : el("p", { class: "mute" }, "no entries"));
  }

  $("login-form").addEventListener("submit", (ev) => { ev.preventDefault(); const t = $("token").value.trim(); $("token").value = ""; login(t); });
  $("logout").addEventListener("click", () => logout());
  $("deny-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const entry = { kind: $("deny-kind").value, value: $("deny-value").value.trim(), ttl: $("deny-ttl").value.trim() };
    if ($("deny-reason").value.trim()) entry.reason = $("deny-reason").value.trim();
    act("POST", "/v1/deny/entries", JSON.stringify([entry]), "application/json").then(() => { $("deny-value").value = ""; });
  });
  if (sessionStorage.getItem(KEY)) login(sessionStorage.getItem(KEY));
})();
